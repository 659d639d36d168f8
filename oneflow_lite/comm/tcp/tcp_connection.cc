#include "oneflow_lite/comm/tcp/tcp_connection.h"

#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "oneflow_lite/comm/tcp/tcp_transport_impl.h"

namespace oflite {
namespace comm {
namespace tcp {
namespace {

constexpr size_t kInBufferSize = 256 * 1024;
// Until the handshake passes (a HELLO frame is about 330 bytes).
constexpr size_t kHandshakeBufferSize = 1024;
// Payloads with at least this much left are read straight into their
// destination (registered memory) instead of through the input buffer.
constexpr size_t kDirectReadThreshold = 64 * 1024;
// After a payload read in place, reads into the input buffer take at most
// this much: enough for the small frames that usually follow bulk data (a
// READY, an ACK) and the next header, so that the next large payload is read
// in place too instead of being copied out of the buffer.
constexpr size_t kBulkTailBytes = 4096;
// Bytes read per readiness event before yielding to other sockets.
constexpr size_t kMaxReadPerEvent = 32u << 20;
constexpr int kMaxIovecs = 64;

Status StatusFromWire(uint32_t code, std::string message) {
  if (code == 0 || code > static_cast<uint32_t>(StatusCode::kDataLoss)) {
    code = static_cast<uint32_t>(StatusCode::kUnknown);
  }
  return Status(static_cast<StatusCode>(code), std::move(message));
}

}  // namespace

int ReceiveLowWater(uint64_t payload_length, uint64_t done, double seconds, uint64_t cap,
                    double trickle_bytes_per_second) {
  if (cap <= 1 || payload_length < kLowWaterMinPayload || done >= payload_length ||
      !(seconds > 0)) {
    return 1;
  }
  const double rate = static_cast<double>(done) / seconds;
  if (!(rate < trickle_bytes_per_second)) return 1;
  const double per_wake = rate * std::chrono::duration<double>(kLowWaterWake).count();
  const double want = std::min({static_cast<double>(payload_length - done),
                                static_cast<double>(cap), per_wake});
  return want < static_cast<double>(kLowWaterMinBytes) ? 1 : static_cast<int>(want);
}

TcpConnection::TcpConnection(TcpTransportImpl* owner, int fd, int peer_rank,
                             const std::string& address)
    : owner_(owner),
      fd_(fd),
      address_(address),
      peer_rank_(peer_rank),
      credits_(owner->options().message_slots),
      last_send_(Clock::now()),
      last_receive_(Clock::now()),
      in_buffer_(kHandshakeBufferSize) {}

TcpConnection::~TcpConnection() {
  SetReceiveLowWater(1);
  write_pin_.reset();
  ::close(fd_);
}

int TcpConnection::peer_rank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peer_rank_;
}

std::string TcpConnection::PeerName() const {
  if (peer_rank_ >= 0) return "rank " + std::to_string(peer_rank_);
  return address_.empty() ? std::string("an unidentified peer")
                          : "an unidentified peer at " + address_;
}

size_t TcpConnection::max_message_size() const {
  return owner_->options().message_slot_size;
}

Status TcpConnection::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

TcpConnection::State TcpConnection::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

// ---------------------------------------------------------------- posting

Status TcpConnection::PostRead(const MemoryRegion& local, size_t local_offset,
                               const RemoteKey& remote, size_t remote_offset,
                               size_t length, Completion done) {
  std::lock_guard<std::mutex> lock(mutex_);
  RETURN_IF_ERROR(CheckTransferBounds(peer_rank_, local, local_offset, remote,
                                      remote_offset, length));
  if ((local.access() & kAccessLocalWrite) == 0) {
    return InvalidArgumentError("READ from rank ", peer_rank_,
                                ": local region lacks local write access");
  }
  return PostTransferLocked(true, local.data() + local_offset, remote,
                            remote_offset, length, std::move(done));
}

Status TcpConnection::PostWrite(const MemoryRegion& local, size_t local_offset,
                                const RemoteKey& remote, size_t remote_offset,
                                size_t length, Completion done) {
  std::lock_guard<std::mutex> lock(mutex_);
  RETURN_IF_ERROR(CheckTransferBounds(peer_rank_, local, local_offset, remote,
                                      remote_offset, length));
  return PostTransferLocked(false, local.data() + local_offset, remote,
                            remote_offset, length, std::move(done));
}

Status TcpConnection::PostTransferLocked(bool is_read, uint8_t* local,
                                         const RemoteKey& remote,
                                         size_t remote_offset, size_t length,
                                         Completion done) {
  if (state_ == State::kFailed) return status_;
  if (state_ != State::kReady) {
    return FailedPreconditionError("connection to ", PeerName(),
                                   " is not established");
  }
  const uint64_t id = next_request_id_++;
  pending_[id] = PendingOp{is_read, local, length, std::move(done)};
  OutFrame frame;
  FrameHeader header;
  header.type = is_read ? FrameType::kReadRequest : FrameType::kWrite;
  header.rkey = remote.rkey;
  header.request_id = id;
  header.address = remote.address + remote_offset;
  header.length = length;
  header.payload_length = is_read ? 0 : length;
  EncodeFrameHeader(header, frame.header);
  if (!is_read) {
    frame.payload = local;
    frame.payload_size = length;
  }
  QueueFrameLocked(std::move(frame));
  return Status::OK();
}

Status TcpConnection::SendMessage(const void* data, size_t size) {
  if (size > max_message_size()) {
    return InvalidArgumentError("message of ", size, " bytes to rank ",
                                peer_rank(), " exceeds the maximum of ",
                                max_message_size());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const bool was_empty = out_.empty();
  Status status = EnqueueMessageLocked(std::string(static_cast<const char*>(data), size));
  if (was_empty && !out_.empty()) WriteSomeLocked().IgnoreError();
  return status;
}

Status TcpConnection::SendMessages(std::vector<std::string> messages) {
  RETURN_IF_ERROR(CheckBatchSizes(messages));
  std::lock_guard<std::mutex> lock(mutex_);
  const bool was_empty = out_.empty();
  Status status;
  for (std::string& message : messages) {
    status = EnqueueMessageLocked(std::move(message));
    if (!status.ok()) break;
  }
  // Only the first frame of an idle connection starts a write; the rest
  // ride on EPOLLOUT, as QueueFrameLocked's do.
  if (was_empty && !out_.empty()) WriteSomeLocked().IgnoreError();
  return status;
}

Status TcpConnection::EnqueueMessageLocked(std::string bytes) {
  if (state_ == State::kFailed) return status_;
  if (state_ != State::kReady) {
    return FailedPreconditionError("connection to ", PeerName(),
                                   " is not established");
  }
  if (credits_ > 0 && backlog_.empty()) {
    --credits_;
    out_.push_back(OwnedFrame(FrameType::kMessage, 0, 0, std::move(bytes)));
    return Status::OK();
  }
  if (backlog_.size() >=
      static_cast<size_t>(owner_->options().max_backlog_messages)) {
    return ResourceExhaustedError("backlog of messages to ", PeerName(),
                                  " is full (", backlog_.size(),
                                  " waiting for credits)");
  }
  backlog_.push_back(std::move(bytes));
  return Status::OK();
}

Status TcpConnection::Flush(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int slots = owner_->options().message_slots;
  bool settled = changed_.wait_until(lock, deadline, [&] {
    return state_ == State::kFailed ||
           (pending_.empty() && backlog_.empty() && out_.empty() &&
            credits_ == slots);
  });
  if (state_ == State::kFailed) return status_;
  if (!settled) {
    return DeadlineExceededError("flush of the connection to ", PeerName(),
                                 ": ", pending_.size(), " operations and ",
                                 slots - credits_ + backlog_.size(),
                                 " messages still outstanding");
  }
  return Status::OK();
}

Status TcpConnection::StartHandshake(const std::string& hello_payload) {
  std::lock_guard<std::mutex> lock(mutex_);
  QueueControlLocked(FrameType::kHello, 0, 0, hello_payload);
  return Status::OK();
}

Status TcpConnection::WaitReady(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_until(lock, deadline,
                      [&] { return state_ != State::kHandshake; });
  if (state_ == State::kFailed) return status_;
  if (state_ == State::kHandshake) {
    return DeadlineExceededError(PeerName(),
                                 " did not complete the handshake in time");
  }
  return Status::OK();
}

void TcpConnection::SayGoodbye() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_ == State::kReady && out_.empty()) {
    QueueControlLocked(FrameType::kGoodbye, 0, 0, "");
  }
}

// ---------------------------------------------------------------- writing

TcpConnection::OutFrame TcpConnection::OwnedFrame(FrameType type, uint64_t request_id,
                                                  uint32_t status, std::string payload) {
  OutFrame frame;
  FrameHeader header;
  header.type = type;
  header.request_id = request_id;
  header.status = status;
  header.length = type == FrameType::kMessage ? payload.size() : 0;
  header.payload_length = payload.size();
  EncodeFrameHeader(header, frame.header);
  frame.owned = std::move(payload);
  // WriteSomeLocked refreshes the pointer (a moved string may relocate).
  frame.payload = reinterpret_cast<const uint8_t*>(frame.owned.data());
  frame.payload_size = frame.owned.size();
  return frame;
}

void TcpConnection::QueueControlLocked(FrameType type, uint64_t request_id,
                                       uint32_t status, std::string payload) {
  QueueFrameLocked(OwnedFrame(type, request_id, status, std::move(payload)));
}

void TcpConnection::QueueFrameLocked(OutFrame frame) {
  if (state_ == State::kFailed) return;
  if (frame.payload == nullptr && !frame.owned.empty()) {
    frame.payload = reinterpret_cast<const uint8_t*>(frame.owned.data());
    frame.payload_size = frame.owned.size();
  }
  const bool was_empty = out_.empty();
  out_.push_back(std::move(frame));
  // Only the first frame starts a write; later ones ride on EPOLLOUT.
  if (was_empty) WriteSomeLocked().IgnoreError();
}

Status TcpConnection::WriteSomeLocked() {
  while (state_ != State::kFailed && !out_.empty()) {
    iovec iov[kMaxIovecs];
    int count = 0;
    for (auto it = out_.begin(); it != out_.end() && count + 2 <= kMaxIovecs;
         ++it) {
      // std::string moves may relocate small buffers: refresh the pointer.
      if (!it->owned.empty()) {
        it->payload = reinterpret_cast<const uint8_t*>(it->owned.data());
      }
      if (it->written < kFrameHeaderSize) {
        iov[count++] = {it->header + it->written,
                        kFrameHeaderSize - it->written};
      }
      size_t payload_written =
          it->written > kFrameHeaderSize ? it->written - kFrameHeaderSize : 0;
      if (payload_written < it->payload_size) {
        iov[count++] = {const_cast<uint8_t*>(it->payload) + payload_written,
                        it->payload_size - payload_written};
      }
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    ssize_t sent = ::sendmsg(fd_, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      // The reader sees the reset and fails the connection with its status.
      ::shutdown(fd_, SHUT_RDWR);
      break;
    }
    last_send_ = Clock::now();
    size_t remaining = static_cast<size_t>(sent);
    while (remaining > 0 && !out_.empty()) {
      OutFrame& front = out_.front();
      size_t left = kFrameHeaderSize + front.payload_size - front.written;
      size_t take = std::min(left, remaining);
      front.written += take;
      remaining -= take;
      if (front.written == kFrameHeaderSize + front.payload_size) {
        out_.pop_front();
      }
    }
  }
  if (out_.empty()) changed_.notify_all();
  const bool want = state_ != State::kFailed && !out_.empty();
  if (want != want_write_) {
    want_write_ = want;
    owner_->SetWriteInterest(this, want);
  }
  return Status::OK();
}

void TcpConnection::OnWritable() {
  std::lock_guard<std::mutex> lock(mutex_);
  WriteSomeLocked().IgnoreError();
}

// ---------------------------------------------------------------- reading

void TcpConnection::OnReadable() {
  Status status = ReadAvailable();
  if (!status.ok()) {
    write_pin_.reset();
    have_header_ = false;
    SetReceiveLowWater(1);  // a payload in progress will not come
    Fail(status);
    return;
  }
  ReturnCredits(false);
}

Status TcpConnection::ReadAvailable() {
  size_t total = 0;
  while (total < kMaxReadPerEvent) {
    RETURN_IF_ERROR(ConsumeBuffered());
    ssize_t received;
    size_t requested;
    const bool into_destination = have_header_ && !in_place_;
    const uint64_t left = into_destination ? header_.payload_length - payload_done_ : 0;
    if (into_destination && left > 0 && header_.payload_length >= kDirectReadThreshold) {
      // The buffer is drained: read the rest of a large payload in place,
      // and a little of what follows into the buffer.
      in_begin_ = in_end_ = 0;
      const size_t tail = std::min(in_buffer_.size(), kBulkTailBytes);
      iovec iov[2] = {{payload_destination_ + payload_done_, left},
                      {in_buffer_.data(), tail}};
      requested = left + tail;
      after_bulk_ = true;
      received = ::readv(fd_, iov, 2);
      if (received > 0) {
        if (owner_->tcp_options().quick_ack) {
          // Best effort (TcpOptions::quick_ack): the mode lapses by itself,
          // so it is set again after every read of the payload.
          const int one = 1;
          ::setsockopt(fd_, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
        }
        const size_t direct = std::min<uint64_t>(received, left);
        payload_done_ += direct;
        in_end_ = received - direct;
        // A large payload trickling in, as over a slow link: wake about
        // once per kLowWaterWake of its arrival, not for every few segments
        // (TcpOptions::receive_low_water).
        double seconds = -1;
        if (payload_done_ < header_.payload_length &&
            owner_->tcp_options().receive_low_water > 1 &&
            header_.payload_length >= kLowWaterMinPayload) {
          const Clock::time_point now = Clock::now();
          if (payload_begin_ == Clock::time_point()) {
            payload_begin_ = now;  // the first read of this payload
          } else {
            seconds = std::chrono::duration<double>(now - payload_begin_).count();
          }
        }
        SetReceiveLowWater(ReceiveLowWater(header_.payload_length, payload_done_, seconds,
                                           owner_->tcp_options().receive_low_water,
                                           owner_->tcp_options().trickle_bytes_per_second));
        if (payload_done_ == header_.payload_length) {
          RETURN_IF_ERROR(FinishFrame(payload_destination_));
        }
      }
    } else {
      const bool drained = in_begin_ == in_end_;
      if (drained) in_begin_ = in_end_ = 0;
      // What must fit behind in_begin_: the whole payload of a frame read in
      // place, else the next header. Bytes are moved to the front only when
      // that does not fit or the free space ran low.
      const size_t needed = have_header_ && in_place_ ? header_.payload_length : kFrameHeaderSize;
      if (in_begin_ > 0 && (in_begin_ + needed > in_buffer_.size() ||
                            in_buffer_.size() - in_end_ < kBulkTailBytes)) {
        std::memmove(in_buffer_.data(), in_buffer_.data() + in_begin_, in_end_ - in_begin_);
        in_end_ -= in_begin_;
        in_begin_ = 0;
      }
      requested = in_buffer_.size() - in_end_;
      // After a payload read in place, and at the start of a burst, read a
      // little first: if the next frame is a large WRITE, its payload then
      // goes straight to its destination instead of through this buffer.
      if (after_bulk_ || (drained && !have_header_)) requested = std::min(requested, kBulkTailBytes);
      after_bulk_ = false;
      // Never 0 (a read of 0 bytes would look like the peer's close): a
      // frame read in place fits the buffer, and a full buffer was compacted.
      if (requested == 0) {
        return InternalError("tcp input buffer of the connection to ", PeerName(),
                             " is full with a frame pending (a bug)");
      }
      received = ::read(fd_, in_buffer_.data() + in_end_, requested);
      if (received > 0) in_end_ += received;
    }
    if (received == 0) {
      return UnavailableError("connection to ", PeerName(),
                              " lost: the peer closed the socket");
    }
    if (received < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::OK();
      return UnavailableError("connection to ", PeerName(),
                              " lost: ", strerror(errno));
    }
    total += received;
    last_receive_ = Clock::now();
    // A short read drained the socket: no need for a read that returns
    // EAGAIN (epoll is level-triggered, so later bytes raise a new event).
    if (static_cast<size_t>(received) < requested) break;
  }
  return ConsumeBuffered();
}

Status TcpConnection::ConsumeBuffered() {
  while (true) {
    const size_t available = in_end_ - in_begin_;
    if (!have_header_) {
      if (available < kFrameHeaderSize) return Status::OK();
      Status decoded = DecodeFrameHeader(in_buffer_.data() + in_begin_,
                                         owner_->limits(), &header_);
      if (!decoded.ok()) {
        return DataLossError(PeerName(), " sent a malformed frame: ",
                             decoded.message());
      }
      in_begin_ += kFrameHeaderSize;
      have_header_ = true;
      in_place_ = false;
      payload_done_ = 0;
      payload_begin_ = Clock::time_point();
      payload_destination_ = nullptr;
      RETURN_IF_ERROR(BeginFrame());
      continue;
    }
    if (in_place_) {
      // Handled where it lies once it is all in: no copy.
      if (available < header_.payload_length) return Status::OK();
      const uint8_t* payload = in_buffer_.data() + in_begin_;
      in_begin_ += header_.payload_length;
      RETURN_IF_ERROR(FinishFrame(payload));
      continue;
    }
    const uint64_t left = header_.payload_length - payload_done_;
    if (left == 0) {  // an empty payload
      RETURN_IF_ERROR(FinishFrame(payload_destination_));
      continue;
    }
    const size_t take = std::min<uint64_t>(available, left);
    if (take == 0) return Status::OK();
    std::memcpy(payload_destination_ + payload_done_,
                in_buffer_.data() + in_begin_, take);
    in_begin_ += take;
    payload_done_ += take;
    if (payload_done_ == header_.payload_length) {
      RETURN_IF_ERROR(FinishFrame(payload_destination_));
    }
  }
}

Status TcpConnection::BeginFrame() {
  const FrameType type = header_.type;
  const bool handshake_frame =
      type == FrameType::kHello || type == FrameType::kHelloAck;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool ready = state_ == State::kReady;
    const bool expected_hello =
        (type == FrameType::kHello && peer_rank_ < 0) ||
        (type == FrameType::kHelloAck && peer_rank_ >= 0);
    if ((ready && handshake_frame) ||
        (!ready && !expected_hello && type != FrameType::kError)) {
      return DataLossError(PeerName(), " sent ", FrameTypeName(type),
                           ready ? " after" : " before", " the handshake");
    }
    if (!ready && header_.payload_length > kMaxHandshakePayload) {
      return DataLossError(PeerName(), " sent a ", FrameTypeName(type), " of ",
                           header_.payload_length,
                           " bytes before the handshake (at most ",
                           kMaxHandshakePayload, ")");
    }
    if (type == FrameType::kReadResponse) {
      auto it = pending_.find(header_.request_id);
      if (it == pending_.end() || !it->second.is_read ||
          it->second.length != header_.length) {
        return DataLossError(PeerName(), " answered unknown READ request ",
                             header_.request_id);
      }
      payload_destination_ = it->second.destination;
      return Status::OK();
    }
  }
  switch (type) {
    case FrameType::kHello:
    case FrameType::kHelloAck:
    case FrameType::kError:
    case FrameType::kMessage:
      // Read in place when the payload fits the input buffer (always, past
      // the handshake, for messages up to the buffer's size); else gathered
      // in a buffer of its own.
      if (header_.payload_length <= in_buffer_.size()) {
        in_place_ = true;
      } else {
        spill_.reset(new uint8_t[header_.payload_length]);  // not zeroed
        payload_destination_ = spill_.get();
      }
      return Status::OK();
    case FrameType::kWrite: {
      auto pin = owner_->regions()->Resolve(header_.rkey, header_.address,
                                            header_.length,
                                            kAccessRemoteWrite,
                                            &payload_destination_);
      if (!pin.ok()) {
        std::lock_guard<std::mutex> lock(mutex_);
        QueueControlLocked(FrameType::kError, header_.request_id,
                           static_cast<uint32_t>(pin.status().code()),
                           "WRITE refused: " + pin.status().message());
        return pin.status().WithContext(PeerName() + " sent an invalid WRITE");
      }
      write_pin_ = std::move(*pin);
      return Status::OK();
    }
    default:
      return Status::OK();
  }
}

Status TcpConnection::FinishFrame(const uint8_t* payload) {
  have_header_ = false;
  const size_t payload_size = header_.payload_length;
  switch (header_.type) {
    case FrameType::kHello:
      return HandleHello(false, payload, payload_size);
    case FrameType::kHelloAck:
      return HandleHello(true, payload, payload_size);
    case FrameType::kMessage: {
      const auto& handler = owner_->options().on_message;
      if (handler) handler(peer_rank_, payload, payload_size);
      ++credits_to_return_;
      return Status::OK();
    }
    case FrameType::kCredit:
      return HandleCredit(header_.request_id);
    case FrameType::kWrite: {
      write_pin_.reset();
      std::lock_guard<std::mutex> lock(mutex_);
      QueueControlLocked(FrameType::kWriteAck, header_.request_id, 0, "");
      return Status::OK();
    }
    case FrameType::kWriteAck:
      return HandleAck(header_.request_id, header_.status);
    case FrameType::kReadRequest:
      return HandleReadRequest();
    case FrameType::kReadResponse:
      return HandleAck(header_.request_id, 0);
    case FrameType::kError:
      return StatusFromWire(header_.status,
                            PeerName() + " reported: " +
                                std::string(reinterpret_cast<const char*>(payload), payload_size));
    case FrameType::kGoodbye:
      return UnavailableError("connection to ", PeerName(),
                              " closed: the peer shut down");
    case FrameType::kPing:
      return Status::OK();
  }
  return DataLossError(PeerName(), " sent an unknown frame");
}

Status TcpConnection::HandleHello(bool is_ack, const uint8_t* payload, size_t size) {
  // Decoded before anything resizes the input buffer `payload` may lie in.
  auto hello = DecodeHello(payload, size);
  if (!hello.ok()) return hello.status().WithContext(PeerName());
  if (!is_ack) {
    Status accepted = owner_->AcceptHello(this, *hello);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepted.ok()) {
      QueueControlLocked(FrameType::kError, 0,
                         static_cast<uint32_t>(accepted.code()),
                         accepted.message());
      return accepted;
    }
    peer_rank_ = static_cast<int>(hello->rank);
    state_ = State::kReady;
    in_buffer_.resize(kInBufferSize);
    QueueControlLocked(FrameType::kHelloAck, 0, 0, owner_->HelloPayload());
  } else {
    int expected;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      expected = peer_rank_;
    }
    RETURN_IF_ERROR(owner_->CheckPeerHello(*hello, expected));
    in_buffer_.resize(kInBufferSize);
    std::lock_guard<std::mutex> lock(mutex_);
    state_ = State::kReady;
  }
  changed_.notify_all();
  owner_->NotifyStateChange();
  return Status::OK();
}

Status TcpConnection::HandleCredit(uint64_t credits) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int slots = owner_->options().message_slots;
  if (credits > static_cast<uint64_t>(slots - credits_)) {
    return DataLossError(PeerName(), " returned ", credits,
                         " credits but only ", slots - credits_,
                         " were outstanding");
  }
  credits_ += static_cast<int>(credits);
  while (credits_ > 0 && !backlog_.empty()) {
    --credits_;
    std::string bytes = std::move(backlog_.front());
    backlog_.pop_front();
    QueueControlLocked(FrameType::kMessage, 0, 0, std::move(bytes));
  }
  changed_.notify_all();
  return Status::OK();
}

Status TcpConnection::HandleAck(uint64_t request_id, uint32_t status) {
  Completion done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(request_id);
    if (it == pending_.end()) {
      return DataLossError(PeerName(), " acknowledged unknown request ",
                           request_id);
    }
    done = std::move(it->second.done);
    pending_.erase(it);
    changed_.notify_all();
  }
  if (done) {
    done(status == 0 ? Status::OK()
                     : StatusFromWire(status, "WRITE to " + PeerName() +
                                                  " failed"));
  }
  return Status::OK();
}

Status TcpConnection::HandleReadRequest() {
  uint8_t* source = nullptr;
  auto pin = owner_->regions()->Resolve(header_.rkey, header_.address,
                                        header_.length, kAccessRemoteRead,
                                        &source);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pin.ok()) {
    QueueControlLocked(FrameType::kError, header_.request_id,
                       static_cast<uint32_t>(pin.status().code()),
                       "READ refused: " + pin.status().message());
    return pin.status().WithContext(PeerName() + " sent an invalid READ");
  }
  OutFrame frame;
  FrameHeader header;
  header.type = FrameType::kReadResponse;
  header.request_id = header_.request_id;
  header.length = header_.length;
  header.payload_length = header_.length;
  EncodeFrameHeader(header, frame.header);
  frame.payload = source;
  frame.payload_size = header_.length;
  frame.pin = std::move(*pin);
  QueueFrameLocked(std::move(frame));
  return Status::OK();
}

void TcpConnection::ReturnCredits(bool force) {
  // Credits go back in batches of half the ring (or on the next tick), so a
  // stream of small messages costs the sender no extra wake-ups.
  const int batch = std::max(1, owner_->options().message_slots / 2);
  if (credits_to_return_ == 0 || (!force && credits_to_return_ < batch)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  QueueControlLocked(FrameType::kCredit, credits_to_return_, 0, "");
  credits_to_return_ = 0;
}

void TcpConnection::SetReceiveLowWater(int want) {
  if (want == receive_low_water_) return;
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want));
  if ((want > 1) != (receive_low_water_ > 1)) owner_->NoteTrickling(want > 1 ? 1 : -1);
  receive_low_water_ = want;
}

// ---------------------------------------------------------------- liveness

void TcpConnection::OnTick(Clock::time_point now, Clock::duration stalled) {
  if (receive_low_water_ > 1 && state() == State::kFailed) {
    // Failed elsewhere (a write, the transport's shutdown) while a payload
    // trickled in: it will not come, so the progress thread may poll again.
    SetReceiveLowWater(1);
  }
  ReturnCredits(true);
  const auto timeout = owner_->options().peer_timeout;
  // The peer is judged only on time this thread was listening: a stall of
  // our own (a long callback, a starved process) moves its silence clock on.
  if (stalled > Clock::duration::zero()) last_receive_ = std::min(now, last_receive_ + stalled);
  if (now - last_receive_ > timeout && state() != State::kFailed) {
    // Before a verdict, read what the peer may have sent since the last
    // readable event (its pings may be waiting in the socket).
    OnReadable();
  }
  Status failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_ == State::kFailed) return;
    if (now - last_receive_ > timeout) {
      failure = DeadlineExceededError(
          PeerName(), " silent for more than ",
          std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(),
          " ms; presumed dead");
    } else if (state_ == State::kReady && out_.empty() &&
               now - last_send_ > timeout / 4) {
      QueueControlLocked(FrameType::kPing, 0, 0, "");
    }
  }
  if (!failure.ok()) {
    write_pin_.reset();
    Fail(failure);
  }
}

void TcpConnection::Fail(const Status& status) {
  std::vector<Completion> callbacks;
  int peer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_ == State::kFailed) return;
    state_ = State::kFailed;
    status_ = status;
    for (auto& [id, op] : pending_) callbacks.push_back(std::move(op.done));
    pending_.clear();
    out_.clear();
    backlog_.clear();
    peer = peer_rank_;
    changed_.notify_all();
  }
  ::shutdown(fd_, SHUT_RDWR);
  owner_->OnConnectionFailed(this, peer, status);
  for (auto& callback : callbacks) {
    if (callback) callback(status);
  }
}

}  // namespace tcp
}  // namespace comm
}  // namespace oflite
