// CommNetRoute: the runtime's RemoteRoute over a CommNet's message router.
//
// Every actor message to another machine travels as one router message on
// channel comm::kActorChannel of the connection to that machine (machine id
// == rank); one connection is FIFO, so per-(src, dst) order is preserved.
// The frames (a message, a chunk of a pushed payload, a "produced" whose
// bytes wait in bounce buffers) are written down in commnet_frame.h, the
// pushed payload's bytes in regst_payload.h.
//
// The route composes one class per job:
//  * pushed payloads (SendWithData; the empty payload of a control
//    register's "produced"): cut into kData frames of at most the
//    transport's message size and kMaxPushedMessageBytes, reassembled here
//    by the receiver and parked for TakePayload; counted under
//    registered-pool (message rings);
//  * registers pulled by the consumer's TASK_COMMNET actor (IsPulledByRead:
//    any register with bytes; StartRead, completion as a kReadDone message,
//    then TakeReadStatus):
//    - CM_STATIC_ZERO_COPY: registration and key exchange at plan load in a
//      ZeroCopyRegistry (zero_copy_registry.h); "produced" carries no bytes
//      and StartRead is one READ of the whole remote copy;
//    - every other register (dynamic shapes): BounceTransfers
//      (bounce_transfers.h), the producer's copy into bounce buffers
//      announced by a kBounce frame, the consumer's pull of its chunks;
//  * outcomes that arrive before they are asked for (READ statuses,
//    payloads, bounce announcements) are parked by message
//    (parked_by_message.h).
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
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/memory/bounce_buffers.h"
#include "oneflow_lite/runtime/commnet/bounce_transfers.h"
#include "oneflow_lite/runtime/commnet/commnet_frame.h"
#include "oneflow_lite/runtime/commnet/parked_by_message.h"
#include "oneflow_lite/runtime/commnet/zero_copy_registry.h"
#include "oneflow_lite/runtime/message_bus.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

// The largest transport message a pushed payload's kData frame fills
// (channel header included), however large the transport's messages are.
// Measured (docs/comm.md, "Pushed register chunks"): with the session's
// 64 KiB + 128-byte message slots filled by each chunk, the GPT's 2-D
// layouts (dp_tp, tp_pp, whose sub-group collectives then all ran as
// all-to-all, pushing every part) on 4 namespace hosts over tcp at 10
// Gbit/s took 40-50 % longer a step than with chunks that keep each
// message within 64 KiB, the cores idle twice as long; the exchange's
// 64 KiB + 45-byte pieces showed no such loss.
inline constexpr size_t kMaxPushedMessageBytes = size_t{64} << 10;

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
  void set_key_prefix(std::string prefix) { registry_.set_key_prefix(std::move(prefix)); }

  Status SendRemote(int64_t machine_id, const ActorMessage& message) override;
  // Sends `message` with the contents of `regst` (local receivers get the
  // payload staged directly).
  Status SendWithData(const ActorMessage& message, const Regst& regst);
  // Sends `message` with `payload` as it is (bytes whose form sender and
  // receiver agree on, e.g. the all-to-all's blocks: all_to_all_parts.h).
  Status SendWithBytes(const ActorMessage& message, const std::string& payload);
  // The payload that came with `message` (a produced message delivered by
  // this route); NotFound if none.
  StatusOr<std::string> TakePayload(const ActorMessage& message);

  // ZeroCopyRegistry::RegisterPlan over the attached store.
  Status RegisterStaticRegisters(const MachinePlan& plan);
  Status FetchStaticKeys(const MachinePlan& plan, std::chrono::milliseconds timeout);
  // Starts pulling the register named by `produced` (a remote register of
  // desc `src`) into `into` (a copy registered by RegisterStaticRegisters);
  // when done the route delivers ActorMessage::ReadDone(produced) to its dst
  // and TakeReadStatus(that message) gives the outcome. An error returned
  // here means no completion will come.
  Status StartRead(const ActorMessage& produced, const RegstDescProto& src, Regst* into);
  Status TakeReadStatus(const ActorMessage& completion);

  // The CommNet the route sends over (for actors with their own channels).
  comm::CommNet* net() const { return net_; }

  // Bytes pushed inside kData frames (SendWithData).
  int64_t bytes_sent() const { return bytes_sent_.load(); }
  int64_t messages_sent() const { return messages_sent_.load(); }
  // Transport messages that carried kData frames (a payload's chunks).
  int64_t data_frames_sent() const { return data_frames_sent_.load(); }
  // Payloads sent through bounce buffers (kBounce frames).
  int64_t bounce_payloads_sent() const { return bounce_payloads_sent_.load(); }
  comm::BounceStreams* bounce_streams() const { return bounce_.streams(); }

 private:
  // A message from the wire or a completion, to the attached runtime's bus;
  // dropped (OK) once detached. Progress threads.
  Status DeliverToBus(const ActorMessage& message);
  Status Send(int64_t machine_id, comm::Connection* connection, const std::string& frame);
  Status SendFrames(int64_t machine_id, const ActorMessage& message, const std::string* payload);
  Status SendThroughBounce(int64_t machine_id, const ActorMessage& message, const Regst& regst);
  void OnReadDone(const ActorMessage& completion, const Status& status);
  void OnMessage(int peer_rank, const void* data, size_t size);
  Status HandleFrame(int peer_rank, std::string_view bytes);
  // Appends a kData frame's chunk (from `from`, for errors); delivers the
  // message once the payload is complete.
  Status HandleDataChunk(const std::string& from, const CommNetFrame& frame);

  comm::CommNet* net_;
  std::function<void(const Status&)> on_error_;
  // Registered at plan load, const afterwards (after FetchStaticKeys).
  ZeroCopyRegistry registry_;
  BounceTransfers bounce_;  // started by Attach, stopped by Detach
  // Written by Attach/Detach (the runtime's thread), read by deliveries on
  // the transport's progress threads (DeliverToBus) under bus_mutex_.
  LocalMessageBus* bus_ = nullptr;
  std::mutex bus_mutex_;
  const RegstStore* regsts_ = nullptr;
  std::mutex partial_mutex_;
  std::map<ParkingKey, std::string> partial_;  // guarded by partial_mutex_
  ParkedByMessage<std::string> staged_;        // complete payloads
  ParkedByMessage<Status> reads_done_;         // READ outcomes
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> messages_sent_{0};
  std::atomic<int64_t> data_frames_sent_{0};
  std::atomic<int64_t> bounce_payloads_sent_{0};
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ROUTE_H_
