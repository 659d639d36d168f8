// BounceTransfers: both ends of CommNetRoute's bounce-buffer path, for
// registers with bytes that are not static zero-copy (CM_BOUNCE_BUFFER:
// dynamic shapes), over comm::BounceStreams, one stream per (register desc,
// consumer task).
//
//  * Producer (Enqueue): the blobs' valid bytes (actual shapes) are copied
//    once into the stream's registered buffers (chunked when larger than a
//    buffer; nothing for 0 bytes); the caller sends the returned kBounce
//    frame (commnet_frame.h), which names the payload's number, its byte
//    count and the blobs' shapes, on the actor channel.
//  * Consumer: the route parks what each kBounce frame announced (Park);
//    StartPull sets the register's blob shapes and READs the chunks, as they
//    are announced, straight into the blobs of the register (registered at
//    plan load by ZeroCopyRegistry). Counted under bounce-buffers: copied ==
//    moved == valid bytes.
// Ordering: the frames of a (desc, consumer) travel in order on the actor
// channel; each names its payload number and the stream checks that the
// chunks pulled are that payload's (DataLoss otherwise). The actor pulls one
// payload at a time in arrival order, so a later piece cannot overtake an
// earlier one's bytes although the chunks travel on kBounceChannel.
//
// Threading: Start and Stop run on one thread (the route's Attach/Detach),
// not concurrently with the other calls; Enqueue, Park and StartPull are
// thread-safe and never block. The CommNet and the registry must outlive
// the object.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_BOUNCE_TRANSFERS_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_BOUNCE_TRANSFERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/memory/bounce_buffers.h"
#include "oneflow_lite/runtime/commnet/commnet_frame.h"
#include "oneflow_lite/runtime/commnet/parked_by_message.h"
#include "oneflow_lite/runtime/commnet/zero_copy_registry.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

// Router channel of the bounce streams (and | comm::kReplyBit).
inline constexpr uint32_t kBounceChannel = 0x11;

class BounceTransfers {
 public:
  // `options` sizes the buffers (its channel is forced to kBounceChannel);
  // `destinations` holds the consumer's registered registers; `on_error`
  // hears of a failed producer-side stream (progress or monitor thread).
  BounceTransfers(comm::CommNet* net, comm::BounceStreamOptions options,
                  const ZeroCopyRegistry* destinations,
                  std::function<void(const Status&)> on_error);
  BounceTransfers(const BounceTransfers&) = delete;
  BounceTransfers& operator=(const BounceTransfers&) = delete;

  // Creates the streams (their router handlers). A failure is kept and
  // returned by every later Enqueue and StartPull.
  void Start();
  // Drops the streams and their handlers; pulls still in flight are dropped.
  void Stop();

  // Enqueues the valid bytes of `regst`, produced for `message` (a
  // "produced" to another machine), toward the peer of `connection`, and
  // returns the kBounce frame to send there. InvalidArgument, with nothing
  // enqueued, when the shapes do not fit one transport message;
  // FailedPrecondition when not started.
  StatusOr<std::string> Enqueue(comm::Connection* connection, const ActorMessage& message,
                                const Regst& regst);
  // Keeps what a kBounce frame from `peer_rank` announced for `message`
  // until StartPull.
  void Park(int peer_rank, const ActorMessage& message, BounceAnnouncement announcement);
  // Pulls the payload announced for `produced` (desc `src`) into `into`;
  // `done` runs once with the outcome. An error returned here (no
  // announcement, shapes that do not fit, not started) means `done` never
  // runs.
  Status StartPull(const ActorMessage& produced, const RegstDescProto& src, Regst* into,
                   comm::Completion done);

  comm::BounceStreams* streams() const { return streams_.get(); }

 private:
  struct Parked {
    int peer_rank = 0;
    BounceAnnouncement announcement;
  };

  comm::CommNet* const net_;
  comm::BounceStreamOptions options_;
  const ZeroCopyRegistry* const destinations_;
  std::function<void(const Status&)> on_error_;
  Status status_;                                 // why the streams could not be created
  std::unique_ptr<comm::BounceStreams> streams_;  // from Start to Stop
  ParkedByMessage<Parked> parked_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_BOUNCE_TRANSFERS_H_
