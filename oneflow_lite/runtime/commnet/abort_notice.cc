#include "oneflow_lite/runtime/commnet/abort_notice.h"

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/wire.h"
#include "oneflow_lite/runtime/commnet/bounce_transfers.h"

namespace oflite {

static_assert(kAbortChannel != comm::kActorChannel && kAbortChannel != kBounceChannel &&
                  kAbortChannel < comm::kCollectiveChannel,
              "the abort channel must not be shared");

AbortNotice::AbortNotice(comm::Transport* transport, comm::MessageRouter* router,
                         PeerAbortHandler on_peer_abort)
    : transport_(transport), router_(router), on_peer_abort_(std::move(on_peer_abort)) {
  router_->SetHandler(kAbortChannel, [this](int peer_rank, const void* data, size_t size) {
    OnNotice(peer_rank, data, size);
  });
}

AbortNotice::~AbortNotice() { router_->RemoveHandler(kAbortChannel); }

std::string AbortNotice::Encode(int rank, const Status& error) {
  std::string message = error.message();
  if (message.size() > kMaxMessageBytes) message.resize(kMaxMessageBytes);
  std::string out;
  comm::wire::AppendU8(&out, kAbortNoticeVersion);
  comm::wire::AppendU32(&out, static_cast<uint32_t>(rank));
  comm::wire::AppendU32(&out, static_cast<uint32_t>(error.code()));
  comm::wire::AppendBytes(&out, message);
  return out;
}

Status AbortNotice::Decode(const void* data, size_t size, int* rank, Status* error) {
  comm::wire::Reader reader(data, size);
  uint8_t version = 0;
  uint32_t sender = 0, code = 0;
  std::string message;
  reader.ReadU8(&version);
  reader.ReadU32(&sender);
  reader.ReadU32(&code);
  reader.ReadBytes(&message, kMaxMessageBytes);
  if (!reader.ok() || reader.remaining() != 0 || version != kAbortNoticeVersion ||
      code == 0 || code > static_cast<uint32_t>(StatusCode::kDataLoss) ||
      sender > static_cast<uint32_t>(INT32_MAX)) {
    return DataLossError("malformed abort notice (", size, " bytes, version ", int{version},
                         ")");
  }
  *rank = static_cast<int>(sender);
  *error = Status(static_cast<StatusCode>(code), message);
  return Status::OK();
}

bool AbortNotice::RecordLocked(int rank, const Status& reason) {
  if (!status_.ok()) return false;
  status_ = reason;
  failed_rank_ = rank;
  for (const auto& [id, listener] : listeners_) listener(status_);
  return true;
}

std::vector<comm::Connection*> AbortNotice::SendToPeers(const std::string& notice, int skip_a,
                                                       int skip_b) {
  std::vector<comm::Connection*> sent;
  for (int peer = 0; peer < transport_->world_size(); ++peer) {
    if (peer == transport_->rank() || peer == skip_a || peer == skip_b) continue;
    StatusOr<comm::Connection*> connection = transport_->GetConnection(peer);
    if (!connection.ok() || !(*connection)->status().ok()) continue;
    if (comm::MessageRouter::Send(*connection, kAbortChannel, notice).ok()) {
      sent.push_back(*connection);
    }
  }
  return sent;
}

bool AbortNotice::Broadcast(const Status& error, std::chrono::milliseconds flush_timeout) {
  const int rank = transport_->rank();
  const Status reason = error.ok() ? InternalError("rank ", rank, " aborted") : error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!RecordLocked(rank, reason)) return false;
  }
  const std::vector<comm::Connection*> sent = SendToPeers(Encode(rank, reason), -1, -1);
  const comm::Deadline deadline = comm::DeadlineAfter(flush_timeout);
  for (comm::Connection* connection : sent) {
    (void)connection->Flush(deadline);  // best effort: a peer may be gone
  }
  return true;
}

bool AbortNotice::RecordPeerLoss(int peer, const Status& error) {
  const std::string detail = error.ok() ? std::string("connection closed") : error.ToString();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!RecordLocked(peer, UnavailableError("lost rank ", peer, ": ", detail))) return false;
  }
  SendToPeers(Encode(peer, UnavailableError("lost (seen by rank ", transport_->rank(), "): ",
                                            detail)),
              peer, -1);
  return true;
}

void AbortNotice::Flush(std::chrono::milliseconds timeout) {
  const comm::Deadline deadline = comm::DeadlineAfter(timeout);
  for (int peer = 0; peer < transport_->world_size(); ++peer) {
    if (peer == transport_->rank()) continue;
    StatusOr<comm::Connection*> connection = transport_->GetConnection(peer);
    if (!connection.ok() || !(*connection)->status().ok()) continue;
    (void)(*connection)->Flush(deadline);  // best effort: a peer may be gone
  }
}

void AbortNotice::OnNotice(int peer_rank, const void* data, size_t size) {
  int rank = peer_rank;
  Status error;
  Status decoded = Decode(data, size, &rank, &error);
  if (!decoded.ok()) error = decoded;
  if (rank == transport_->rank() && rank != peer_rank) return;  // our own failure, echoed
  if (rank < 0 || rank >= transport_->world_size()) {
    error = DataLossError("abort notice from rank ", peer_rank, " names rank ", rank,
                          ", outside the job: ", error.ToString());
    rank = peer_rank;
  }
  const Status reason = AbortedError("rank ", rank, " failed: ", error.ToString());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!RecordLocked(rank, reason)) return;
  }
  // Relayed with the original error, so every rank names the same culprit.
  SendToPeers(Encode(rank, error), peer_rank, rank);
  if (on_peer_abort_) on_peer_abort_(rank, reason);
}

int AbortNotice::AddListener(Listener listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int id = next_listener_++;
  if (!status_.ok()) listener(status_);
  listeners_[id] = std::move(listener);
  return id;
}

void AbortNotice::RemoveListener(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  listeners_.erase(id);
}

Status AbortNotice::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

int AbortNotice::failed_rank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_rank_;
}

}  // namespace oflite
