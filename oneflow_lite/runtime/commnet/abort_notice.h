// AbortNotice: one rank's failure, made known to every rank of the job.
//
// When a rank's runtime aborts for a local reason (a kernel error, the NaN
// check, the watchdog), its peers would otherwise learn of it only when their
// own waits run out (a ring collective's deadline, the watchdog) or when the
// failed process has gone. Broadcast(error) instead sends a small notice to
// every peer at once, on router channel kAbortChannel of each connection,
// and each receiver's AbortNotice makes that failure its own: the first
// abort seen (a local Broadcast or a peer's notice) is status(); for a
// peer's it reads "rank R failed: <R's error>" (code kAborted).
//
// The first cause travels: a notice names the rank that failed first, not
// necessarily its sender. A rank that learns of a failure first from a
// peer's notice, or that loses a peer (RecordPeerLoss), relays a notice
// naming that original rank to every other peer. So when a failure or loss
// is seen by different ranks through different connections (one rank sees
// the culprit's connection break, another first sees the first rank leave),
// every rank still names the same culprit: a notice always travels before
// its sender's connection closes.
//
// Listeners (AddListener) hear that first abort once: collective actors
// cancel their ring operations in flight (comm/collective/cancel.h) and fail
// their runtime with it. `on_peer_abort` is then called for a peer's notice
// (e.g. to end the process when nothing local would notice). Later aborts,
// local or remote, are ignored: one cause is reported, not its echoes.
//
// Wire format (version 1, little-endian, after the router's u32 channel id):
//   u8 version (1), u32 rank of the failed process (the sender, or for a
//   relayed notice the original culprit), u32 StatusCode of its error, u32
//   message length, message bytes (at most kMaxMessageBytes; longer messages
//   are cut). Anything else is a malformed notice, which is treated as that
//   peer's failure too (the peer is broken either way); so is a notice
//   naming a rank outside the job. A relayed notice naming the receiver
//   itself is ignored (its own failure, echoed).
//
// Threading. Thread-safe. Listeners and on_peer_abort run on the thread that
// saw the abort (Broadcast's or RecordPeerLoss's caller, or the transport's
// progress thread for a notice): they must not block or call into this
// object; listeners run under its lock, so after RemoveListener returns its
// listener is never called. Broadcast blocks at most `flush_timeout` waiting
// for the notices to leave; relays (RecordPeerLoss, a peer's notice) never
// block: call Flush from a thread that may block before the process exits.
// The transport and router must outlive the AbortNotice.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_ABORT_NOTICE_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_ABORT_NOTICE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/comm/message_router.h"
#include "oneflow_lite/comm/transport.h"
#include "oneflow_lite/common/status.h"

namespace oflite {

// Router channel of abort notices: clear of comm::kActorChannel (0x10),
// kBounceChannel (0x11, bounce_transfers.h) and the collective channels
// (comm::kCollectiveChannel = 0x100 and up); checked in abort_notice.cc.
inline constexpr uint32_t kAbortChannel = 0x1f;
inline constexpr uint8_t kAbortNoticeVersion = 1;

class AbortNotice {
 public:
  static constexpr size_t kMaxMessageBytes = 2048;
  using PeerAbortHandler = std::function<void(int peer_rank, const Status& reason)>;
  using Listener = std::function<void(const Status& reason)>;

  // Installs the kAbortChannel handler on `router` (notices that arrived
  // earlier are parked by the router and delivered now). `on_peer_abort`
  // may be empty.
  AbortNotice(comm::Transport* transport, comm::MessageRouter* router,
              PeerAbortHandler on_peer_abort);
  ~AbortNotice();
  AbortNotice(const AbortNotice&) = delete;
  AbortNotice& operator=(const AbortNotice&) = delete;

  // This rank failed with `error` (not OK): unless an abort was seen
  // already, makes it status(), tells the listeners and sends the notice to
  // every peer, then waits up to `flush_timeout` for it to leave (peers that
  // are gone are skipped). Returns true when this call was the first abort.
  bool Broadcast(const Status& error,
                 std::chrono::milliseconds flush_timeout = std::chrono::milliseconds(2000));

  // Peer `peer` was lost (its connection failed with `error`): unless an
  // abort was seen already, makes "lost rank P: <error>" status(), tells
  // the listeners and relays a notice naming `peer` to every other peer
  // (never blocks). Returns true when this call was the first abort.
  bool RecordPeerLoss(int peer, const Status& error);

  // Waits up to `timeout` for the notices sent so far to leave (peers that
  // are gone are skipped).
  void Flush(std::chrono::milliseconds timeout);

  // Calls `listener` with the first abort, at once if there was one already.
  // Returns an id for RemoveListener.
  int AddListener(Listener listener);
  void RemoveListener(int id);

  // The first abort; OK while there was none.
  Status status() const;
  // The rank that failed first (this rank for a local Broadcast); -1 if none.
  int failed_rank() const;

  // The notice's payload (without the router's channel id), and its
  // decoding (DataLoss when malformed).
  static std::string Encode(int rank, const Status& error);
  static Status Decode(const void* data, size_t size, int* rank, Status* error);

 private:
  void OnNotice(int peer_rank, const void* data, size_t size);
  // Records the first abort and tells the listeners; false if not first.
  bool RecordLocked(int rank, const Status& reason);
  // Sends `notice` to every healthy peer except `skip_a` and `skip_b`;
  // returns the connections it went to.
  std::vector<comm::Connection*> SendToPeers(const std::string& notice, int skip_a, int skip_b);

  comm::Transport* const transport_;
  comm::MessageRouter* const router_;
  const PeerAbortHandler on_peer_abort_;
  mutable std::mutex mutex_;
  Status status_;        // guarded by mutex_
  int failed_rank_ = -1;  // guarded by mutex_
  std::map<int, Listener> listeners_;  // guarded by mutex_
  int next_listener_ = 0;              // guarded by mutex_
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_ABORT_NOTICE_H_
