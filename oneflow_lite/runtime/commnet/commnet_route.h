// CommNetRoute: the runtime's RemoteRoute over a CommNet's message router.
//
// Every actor message to another machine travels as one or more router
// messages on channel comm::kActorChannel of the connection to that machine
// (machine id == rank). Frame (version 1, little-endian):
//   u8 version (1), u8 type, 41-byte EncodeActorMessage, and for type 2
//   (message with data) u64 total payload bytes, u64 offset, chunk bytes.
// A "produced" message whose register exists on this machine carries the
// register's valid bytes (per blob: u32 ndim, i64 dims, u64 bytes, data; a
// dynamic blob sends only its actual shape's bytes), cut into chunks that fit
// the transport's message size. The receiver reassembles the payload, keeps
// it for the receiving actor (TakePayload) and then delivers the message
// locally. One connection per peer is FIFO and a sender's chunks are sent
// before its next message, so per-(src, dst) order is preserved.
//
// Static zero-copy (registers with cross_machine_strategy
// CM_STATIC_ZERO_COPY): the producer's "produced" carries no bytes. At plan
// load RegisterStaticRegisters registers every copy of such a register (for
// remote READ; keys published in the control-plane KV under
// "oflite/zc/<desc>/<index>") and every copy of a TASK_COMMNET task's output
// (local write); after a barrier FetchStaticKeys reads the peers' keys. The
// consumer then calls StartRead, a one-sided READ of the whole remote copy
// into its own register; on completion the route delivers to the consumer a
// kStart message carrying the produced message's src/desc/index/piece, and
// TakeReadStatus gives the READ's status.
//
// Set-up: construct, give it to RuntimeOptions.remote_route, create the
// runtime, then Attach(bus, regsts) before any peer may send (the router
// parks earlier messages). SendRemote, SendWithData and TakePayload are
// thread-safe. A malformed frame is reported through `on_error` (and
// dropped). The CommNet, bus and store must outlive the route.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ROUTE_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ROUTE_H_

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/runtime/message_bus.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

inline constexpr uint8_t kCommNetWireVersion = 1;

// Serializes every blob of `regst` (actual shapes, valid bytes only).
std::string SerializeRegst(const Regst& regst);
// Writes a payload from SerializeRegst into `regst` (same blob count and
// dtypes; each shape must fit the blob's capacity). DataLoss otherwise.
Status DeserializeRegst(const std::string& payload, Regst* regst);
// The blobs of a payload as (shape, bytes) pairs.
struct PayloadBlob {
  Shape shape;
  std::string bytes;
};
StatusOr<std::vector<PayloadBlob>> ParsePayload(const std::string& payload);

class CommNetRoute final : public RemoteRoute {
 public:
  CommNetRoute(comm::CommNet* net, std::function<void(const Status&)> on_error)
      : net_(net), on_error_(std::move(on_error)) {}
  ~CommNetRoute() override;

  void Attach(LocalMessageBus* bus, const RegstStore* regsts);
  // Removes the router handler (before the bus goes away).
  void Detach();

  Status SendRemote(int64_t machine_id, const ActorMessage& message) override;
  // Sends `message` with the contents of `regst` (local receivers get the
  // payload staged directly).
  Status SendWithData(const ActorMessage& message, const Regst& regst);
  // The payload that came with `message` (a produced message delivered by
  // this route); NotFound if none.
  StatusOr<std::string> TakePayload(const ActorMessage& message);

  Status RegisterStaticRegisters(const MachinePlan& plan);
  Status FetchStaticKeys(const MachinePlan& plan, std::chrono::milliseconds timeout);
  // True when registers of `src` are pulled by READ (a CM_STATIC_ZERO_COPY
  // register with bytes to move).
  static bool IsStaticZeroCopy(const RegstDescProto& src);
  Status StartRead(const ActorMessage& produced, const RegstDescProto& src, Regst* into);
  Status TakeReadStatus(const ActorMessage& completion);

  // The CommNet the route sends over (for actors with their own channels).
  comm::CommNet* net() const { return net_; }

  int64_t bytes_sent() const { return bytes_sent_.load(); }
  int64_t messages_sent() const { return messages_sent_.load(); }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int32_t, int64_t>;
  static Key KeyOf(const ActorMessage& m) {
    return Key(m.src_actor_id, m.dst_actor_id, m.regst_desc_id, m.regst_index, m.piece_id);
  }
  Status SendFrames(int64_t machine_id, const ActorMessage& message, const std::string* payload);
  void OnMessage(int peer_rank, const void* data, size_t size);
  Status HandleFrame(int peer_rank, const std::string& frame);

  static int64_t RegstBytes(const RegstDescProto& desc);

  comm::CommNet* net_;
  std::map<std::pair<int64_t, int32_t>, std::unique_ptr<comm::MemoryRegion>> regions_;
  std::map<std::pair<int64_t, int32_t>, comm::RemoteKey> remote_keys_;  // const after Fetch
  std::map<Key, Status> reads_done_;  // guarded by mutex_
  std::function<void(const Status&)> on_error_;
  LocalMessageBus* bus_ = nullptr;
  const RegstStore* regsts_ = nullptr;
  std::mutex mutex_;
  std::map<Key, std::string> partial_;  // guarded by mutex_ (progress thread)
  std::map<Key, std::string> staged_;   // guarded by mutex_
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> messages_sent_{0};
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ROUTE_H_
