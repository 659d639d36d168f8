// Strategy (3): static zero-copy. For registers whose size the plan fixes,
// every cross-machine register is registered once (at plan load) and its
// RemoteKey published; the consumer pulls a produced register with one
// one-sided READ straight into its own registered register. No CPU copy and
// no registration on the hot path: the counters show registrations only at
// load time and bytes_copied == 0.
//
// StaticRegisterSet owns the registrations (RAII) of register memory the
// caller owns, named by a RegisterId, and the RemoteKeys peers published for
// their registers. It is the one implementation the runtime's CommNet route
// uses (runtime/commnet/commnet_route.h: one set for the zero-copy sources
// and destinations, one for the destinations of bounce-buffer pulls, whose
// bytes arrive through BounceStreams), and the strategy suite tests it.
// Publishing keys (the control-plane KV) is the caller's.
//
// Threading: the Register*/AddRemoteSource calls are the load phase and must
// not run concurrently with anything else on the set; afterwards Find and
// PostPull are thread-safe (the set is not modified). The registered memory
// must outlive the set; the set must outlive every pull it posted.
#ifndef ONEFLOW_LITE_COMM_MEMORY_ZERO_COPY_H_
#define ONEFLOW_LITE_COMM_MEMORY_ZERO_COPY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "oneflow_lite/comm/memory/counters.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

// Names one registered register: (register desc id, copy index) in the
// runtime; desc ids are unique in a job, so the name is the same on every
// rank.
using RegisterId = std::pair<int64_t, int32_t>;
std::string RegisterName(const RegisterId& id);  // "register <desc>[<index>]"

class StaticRegisterSet {
 public:
  // `counters` (may be null, else must outlive the set) get one registration
  // per Register* call and, per completed pull, bytes_moved and a transfer.
  StaticRegisterSet(Transport* transport, StrategyCounters* counters)
      : transport_(transport), counters_(counters) {}

  // Producer side, load time: registers `size` bytes at `data` for peers to
  // READ (kAccessRemoteRead) and returns the RemoteKey to publish.
  // AlreadyExists if `id` is registered.
  StatusOr<RemoteKey> RegisterSource(const RegisterId& id, void* data, size_t size);
  // Consumer side, load time: registers a READ destination (kAccessLocalWrite).
  Status RegisterDestination(const RegisterId& id, void* data, size_t size);
  // Consumer side, load time: the key a peer published for its source `id`.
  void AddRemoteSource(const RegisterId& id, const RemoteKey& key);

  // The region registered under `id`, or FailedPrecondition naming it.
  StatusOr<const MemoryRegion*> Find(const RegisterId& id) const;

  // Hot path: posts one READ of the first `bytes` of the peer's source
  // `source` (added by AddRemoteSource) into the destination `destination`
  // at offset 0 over `connection`. `done` runs once, on the transport's
  // progress thread, after the counters were bumped (on success). Never
  // blocks. An error returned here (an id not loaded, a range beyond either
  // register, a failed connection) means `done` will not run.
  Status PostPull(Connection* connection, const RegisterId& source,
                  const RegisterId& destination, size_t bytes, Completion done) const;

  size_t count() const { return regions_.size(); }

 private:
  Status Register(const RegisterId& id, void* data, size_t size, uint32_t access);

  Transport* const transport_;
  StrategyCounters* const counters_;
  std::map<RegisterId, std::unique_ptr<MemoryRegion>> regions_;
  std::map<RegisterId, RemoteKey> remote_sources_;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_MEMORY_ZERO_COPY_H_
