// ZeroCopyRegistry: the registered register memory of CommNetRoute's READ
// pulls, and the exchange of the keys a READ needs.
//
// Which registers are pulled by READ (the consumer's TASK_COMMNET actor
// calls CommNetRoute::StartRead for them): every register with bytes.
//  * CM_STATIC_ZERO_COPY (IsStaticZeroCopyRegst): at plan load the producer
//    registers every copy for remote READ (comm::StaticRegisterSet, counted
//    under static-zero-copy) and publishes its key in the control-plane KV
//    under "<prefix>oflite/zc/<desc>/<index>"; after a barrier the consumer
//    fetches the peers' keys (FetchPeerKeys). A pull is one READ of the
//    whole remote copy into the consumer's own register (PostPull).
//  * every other register with bytes (IsBounceRegst: dynamic shapes) travels
//    through bounce buffers (bounce_transfers.h); the registry only holds
//    the consumer's destinations, counted under bounce-buffers.
// Either way the consumer registers its READ destinations, the TASK_COMMNET
// task's output copies, at plan load.
//
// Threading: RegisterPlan and FetchPeerKeys are the load phase (one thread,
// nothing else running on the registry); afterwards PostPull and
// FindBounceDestination are thread-safe. The CommNet and the registered
// registers' memory must outlive the registry; destroying it deregisters.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_ZERO_COPY_REGISTRY_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_ZERO_COPY_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/memory/zero_copy.h"
#include "oneflow_lite/runtime/actor_message.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

// Bytes a copy of the register spans (the end of its last blob).
int64_t RegstSpanBytes(const RegstDescProto& desc);
// A CM_STATIC_ZERO_COPY register with bytes to move.
bool IsStaticZeroCopyRegst(const RegstDescProto& src);
// A register with bytes that is not static zero-copy: through bounce buffers.
bool IsBounceRegst(const RegstDescProto& src);
// True when the consumer's TASK_COMMNET actor pulls registers of `src` with
// StartRead (IsStaticZeroCopyRegst or IsBounceRegst).
bool IsPulledByRead(const RegstDescProto& src);

class ZeroCopyRegistry {
 public:
  explicit ZeroCopyRegistry(comm::CommNet* net);
  ZeroCopyRegistry(const ZeroCopyRegistry&) = delete;
  ZeroCopyRegistry& operator=(const ZeroCopyRegistry&) = delete;

  // Prefixed to the control-plane keys ("<prefix>oflite/zc/<desc>/<index>"),
  // so that several runs over one CommNet never read each other's keys. Set
  // before RegisterPlan; empty by default.
  void set_key_prefix(std::string prefix) { key_prefix_ = std::move(prefix); }

  // Registers this machine's static zero-copy sources that a remote task
  // consumes (and publishes their keys) and the READ destinations of its
  // TASK_COMMNET tasks, both strategies. `regsts` resolves the copies.
  Status RegisterPlan(const MachinePlan& plan, const RegstStore& regsts);
  // Reads the keys of the remote static zero-copy sources this machine's
  // TASK_COMMNET tasks pull, waiting up to `timeout` for each. Blocks.
  Status FetchPeerKeys(const MachinePlan& plan, std::chrono::milliseconds timeout);

  // Posts one READ of the whole remote copy named by `produced` (a register
  // of static zero-copy desc `src`) into `into`; `done` runs as for
  // comm::StaticRegisterSet::PostPull. InvalidArgument when the sizes differ.
  Status PostPull(const ActorMessage& produced, const RegstDescProto& src, const Regst& into,
                  comm::Completion done) const;
  // The registered region of `into`, the destination of a bounce pull.
  StatusOr<const comm::MemoryRegion*> FindBounceDestination(const Regst& into) const;

 private:
  std::string KeyName(int64_t desc, int32_t index) const;
  // Registers every copy of `desc` as a zero-copy source and publishes its key.
  Status RegisterSources(const RegstDescProto& desc, const RegstStore& regsts);
  // Registers every copy of `desc` (a commnet task's output) in `set`.
  Status RegisterDestinations(const RegstDescProto& desc, const RegstStore& regsts,
                              comm::StaticRegisterSet* set);

  comm::CommNet* const net_;
  // Zero-copy sources (this rank's produced registers) and destinations,
  // with the peers' keys; counted under static-zero-copy.
  comm::StaticRegisterSet zero_copy_registers_;
  // The commnet tasks' registers that bounce pulls land in; counted under
  // bounce-buffers.
  comm::StaticRegisterSet bounce_destinations_;
  std::string key_prefix_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_ZERO_COPY_REGISTRY_H_
