// CommNetRoute: the runtime's RemoteRoute over a CommNet's message router.
//
// Every actor message to another machine travels as one router message on
// channel comm::kActorChannel of the connection to that machine (machine id
// == rank); one connection is FIFO, so per-(src, dst) order is preserved.
// Frame (version 2, little-endian): u8 version (2), u8 type, 41-byte
// EncodeActorMessage, then by type:
//   1 message: nothing more;
//   2 message with pushed data (SendWithData, the collective actors'
//     fallback parts; the empty payload of a control register's
//     "produced"): u64 total payload bytes, u64 offset, chunk bytes
//     (payload = SerializeRegst), reassembled by the receiver for
//     TakePayload. Counted under registered-pool (message rings).
//   3 produced, data through bounce buffers: u64 payload number, u64 valid
//     bytes, u32 blob count, per blob u32 rank and i64 dims (actual shape).
//
// Registers pulled by the consumer's TASK_COMMNET actor (IsPulledByRead:
// any register with bytes; StartRead, completion as a kReadDone message, then
// TakeReadStatus):
//  * CM_STATIC_ZERO_COPY (strategy 3, comm::StaticRegisterSet): the
//    producer's "produced" carries no bytes. At plan load
//    RegisterStaticRegisters registers every copy of such a register (for
//    remote READ; keys published in the control-plane KV under
//    "<prefix>oflite/zc/<desc>/<index>", see set_key_prefix) and the
//    consumer's READ destinations; after a barrier FetchStaticKeys reads the
//    peers' keys. StartRead is one one-sided READ of the whole remote copy
//    into the actor's own register (StaticRegisterSet::PostPull).
//  * every other register (CM_BOUNCE_BUFFER: dynamic shapes): the producer
//    copies the blobs' valid bytes (actual shapes) once into the registered
//    bounce buffers of the stream (register desc, consumer task)
//    (comm::BounceStreams; chunked when larger than a buffer; nothing for 0
//    bytes) and sends a type-3 frame with the payload's number, byte count
//    and shapes. StartRead sets the actor's blob shapes and READs the
//    chunks, as they are announced, straight into the blobs of the actor's
//    own register. The consumer registers its READ destinations (the
//    TASK_COMMNET output copies) at plan load in a StaticRegisterSet of its
//    own (RegisterStaticRegisters); the producer's buffers are registered
//    at the stream's first payload. Counted under bounce-buffers: copied ==
//    moved == valid bytes.
// Ordering for a bounce register: the produced frames and end-of-data of a
// (desc, consumer) travel in order on the actor channel; each produced names
// its payload number, and the stream checks that the chunks pulled are that
// payload's (DataLoss otherwise). The actor pulls one payload at a time in
// arrival order and handles end-of-data only when nothing is pending, so
// neither a later produced nor end-of-data can overtake an earlier piece's
// bytes, even though the chunks travel on their own channel.
//
// Set-up: construct, give it to RuntimeOptions.remote_route, create the
// runtime, then Attach(bus, regsts) before any peer may send (the router
// parks earlier messages), then RegisterStaticRegisters and (after a
// barrier) FetchStaticKeys. SendRemote, SendWithData, TakePayload,
// StartRead and TakeReadStatus are thread-safe and never block. A malformed
// frame or a failed bounce stream is reported through `on_error` (and
// dropped). The CommNet, bus and store must outlive the route; a READ
// completion must not arrive after the route is destroyed (the runtime has
// finished or the process is failing).
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ROUTE_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ROUTE_H_

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/memory/bounce_buffers.h"
#include "oneflow_lite/comm/memory/zero_copy.h"
#include "oneflow_lite/runtime/message_bus.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

inline constexpr uint8_t kCommNetWireVersion = 2;
// Router channel of the route's bounce streams (and | comm::kReplyBit).
inline constexpr uint32_t kBounceChannel = 0x11;

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
  // `bounce` sizes the bounce buffers (channel is forced to kBounceChannel).
  CommNetRoute(comm::CommNet* net, std::function<void(const Status&)> on_error,
               comm::BounceStreamOptions bounce = comm::BounceStreamOptions());
  ~CommNetRoute() override;

  // Also creates the bounce streams (their router handlers).
  void Attach(LocalMessageBus* bus, const RegstStore* regsts);
  // Removes the router handlers and drops the bounce streams (before the
  // bus goes away; after the run: pulls still in flight are dropped).
  void Detach();
  // Prefixed to the control-plane keys of the static zero-copy registers
  // ("<prefix>oflite/zc/<desc>/<index>"), so that several runs over one
  // CommNet (training, then evaluation) never read each other's keys. Set
  // before RegisterStaticRegisters; empty by default.
  void set_key_prefix(std::string prefix) { key_prefix_ = std::move(prefix); }

  Status SendRemote(int64_t machine_id, const ActorMessage& message) override;
  // Sends `message` with the contents of `regst` (local receivers get the
  // payload staged directly).
  Status SendWithData(const ActorMessage& message, const Regst& regst);
  // The payload that came with `message` (a produced message delivered by
  // this route); NotFound if none.
  StatusOr<std::string> TakePayload(const ActorMessage& message);

  Status RegisterStaticRegisters(const MachinePlan& plan);
  Status FetchStaticKeys(const MachinePlan& plan, std::chrono::milliseconds timeout);
  // A CM_STATIC_ZERO_COPY register with bytes to move.
  static bool IsStaticZeroCopy(const RegstDescProto& src);
  // A register with bytes that is not static zero-copy: through bounce buffers.
  static bool IsBounce(const RegstDescProto& src);
  // True when the consumer's TASK_COMMNET actor pulls registers of `src` with
  // StartRead (IsStaticZeroCopy or IsBounce).
  static bool IsPulledByRead(const RegstDescProto& src);
  // Starts pulling the register named by `produced` (a remote register of
  // desc `src`) into `into` (a copy registered by RegisterStaticRegisters);
  // when done the route delivers ActorMessage::ReadDone(produced) to its dst
  // and TakeReadStatus(that message) gives the outcome. An error returned
  // here means no completion will come.
  Status StartRead(const ActorMessage& produced, const RegstDescProto& src, Regst* into);
  Status TakeReadStatus(const ActorMessage& completion);

  // The CommNet the route sends over (for actors with their own channels).
  comm::CommNet* net() const { return net_; }

  // Bytes pushed inside type-2 frames (SendWithData).
  int64_t bytes_sent() const { return bytes_sent_.load(); }
  int64_t messages_sent() const { return messages_sent_.load(); }
  // Payloads sent through bounce buffers (type-3 frames).
  int64_t bounce_payloads_sent() const { return bounce_payloads_sent_.load(); }
  comm::BounceStreams* bounce_streams() const { return bounce_.get(); }

 private:
  std::string StaticKeyName(int64_t desc, int32_t index) const;
  using Key = std::tuple<int64_t, int64_t, int64_t, int32_t, int64_t>;
  static Key KeyOf(const ActorMessage& m) {
    return Key(m.src_actor_id, m.dst_actor_id, m.regst_desc_id, m.regst_index, m.piece_id);
  }
  // What a type-3 frame announced, kept for StartRead.
  struct BounceHeader {
    int peer_rank;
    uint64_t payload;
    uint64_t total;
    std::vector<Shape> shapes;
  };
  // A message from the wire or a completion, to the attached runtime's bus;
  // dropped (OK) once detached. Progress threads.
  Status DeliverToBus(const ActorMessage& message);
  Status SendFrames(int64_t machine_id, const ActorMessage& message, const std::string* payload);
  Status SendThroughBounce(int64_t machine_id, const ActorMessage& message, const Regst& regst);
  Status StartBounceRead(const ActorMessage& produced, const RegstDescProto& src, Regst* into);
  void OnReadDone(const ActorMessage& completion, const Status& status);
  void OnMessage(int peer_rank, const void* data, size_t size);
  Status HandleFrame(int peer_rank, const std::string& frame);
  Status HandleBounceFrame(int peer_rank, const ActorMessage& message, const std::string& frame);

  // Registers every copy of `desc` as a zero-copy source and publishes its key.
  Status RegisterSources(const RegstDescProto& desc);
  // Registers every copy of `desc` (a commnet task's output) in `set`.
  Status RegisterDestinations(const RegstDescProto& desc, comm::StaticRegisterSet* set);

  static int64_t RegstBytes(const RegstDescProto& desc);

  comm::CommNet* net_;
  // Registered at plan load, const afterwards (after FetchStaticKeys).
  // Zero-copy sources (this rank's produced registers) and destinations
  // (the commnet tasks' registers), with the peers' keys; counted under
  // static-zero-copy.
  comm::StaticRegisterSet zero_copy_registers_;
  // The commnet tasks' registers that bounce pulls land in; counted under
  // bounce-buffers.
  comm::StaticRegisterSet bounce_destinations_;
  std::map<Key, Status> reads_done_;  // guarded by mutex_
  std::function<void(const Status&)> on_error_;
  // Written by Attach/Detach (the runtime's thread), read by deliveries on
  // the transport's progress threads (DeliverToBus) under bus_mutex_.
  LocalMessageBus* bus_ = nullptr;
  std::mutex bus_mutex_;
  const RegstStore* regsts_ = nullptr;
  std::mutex mutex_;
  std::map<Key, std::string> partial_;  // guarded by mutex_ (progress thread)
  std::map<Key, std::string> staged_;   // guarded by mutex_
  std::map<Key, BounceHeader> bounce_headers_;  // guarded by mutex_
  comm::BounceStreamOptions bounce_options_;
  Status bounce_status_;  // why bounce_ could not be created
  std::unique_ptr<comm::BounceStreams> bounce_;  // from Attach to Detach
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> messages_sent_{0};
  std::atomic<int64_t> bounce_payloads_sent_{0};
  std::string key_prefix_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ROUTE_H_
