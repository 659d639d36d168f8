#include "oneflow_lite/comm/shm/shm_connection.h"

#include <glog/logging.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "oneflow_lite/comm/shm/shm_transport_impl.h"
#include "oneflow_lite/comm/shm/shm_tsan.h"
#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace shm {

ShmConnection::ShmConnection(ShmTransportImpl* transport, ConnectionSetup setup)
    : transport_(transport),
      peer_rank_(setup.peer_rank),
      side_(setup.side),
      peer_pid_(setup.peer_pid),
      socket_fd_(setup.socket_fd),
      peer_doorbell_fd_(setup.peer_doorbell_fd),
      pair_id_(setup.pair_id),
      segment_(std::move(setup.segment)),
      peer_table_(std::move(setup.peer_table)),
      header_(reinterpret_cast<SegmentHeader*>(segment_->data())),
      slots_(header_->slots),
      slot_size_(header_->slot_size),
      out_ring_(&header_->rings[side_]),
      in_ring_(&header_->rings[1 - side_]),
      out_slots_(RingSlots(segment_->data(), side_, slots_, slot_size_)),
      in_slots_(RingSlots(segment_->data(), 1 - side_, slots_, slot_size_)),
      out_buffers_(slots_),
      last_credit_(Clock::now()) {}

ShmConnection::~ShmConnection() {
  if (pidfd_ >= 0) ::close(pidfd_);
  ::close(socket_fd_);
  ::close(peer_doorbell_fd_);
}

Status ShmConnection::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

void ShmConnection::Fail(const Status& status, bool report) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!status_.ok()) return;
    status_ = status;
    failed_.store(true, std::memory_order_release);
    backlog_.clear();
    backlog_size_.store(0, std::memory_order_relaxed);
  }
  // Like a queue pair entering the error state: the peer sees it too (its
  // progress thread gets EPOLLHUP on the handshake socket).
  ::shutdown(socket_fd_, SHUT_RDWR);
  changed_.notify_all();
  if (report) transport_->ReportPeerError(peer_rank_, status);
}

Status ShmConnection::PostRead(const MemoryRegion& local, size_t local_offset,
                               const RemoteKey& remote, size_t remote_offset, size_t length,
                               Completion done) {
  return Post(false, local, local_offset, remote, remote_offset, length, std::move(done));
}

Status ShmConnection::PostWrite(const MemoryRegion& local, size_t local_offset,
                                const RemoteKey& remote, size_t remote_offset, size_t length,
                                Completion done) {
  return Post(true, local, local_offset, remote, remote_offset, length, std::move(done));
}

Status ShmConnection::Post(bool write, const MemoryRegion& local, size_t local_offset,
                           const RemoteKey& remote, size_t remote_offset, size_t length,
                           Completion done) {
  RETURN_IF_ERROR(
      CheckTransferBounds(peer_rank_, local, local_offset, remote, remote_offset, length));
  if (!write && !(local.access() & kAccessLocalWrite)) {
    return InvalidArgumentError("READ from rank ", peer_rank_,
                                ": the local region lacks kAccessLocalWrite");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!status_.ok()) return status_;
    ++ops_posted_;
  }
  OneSidedOp op;
  op.connection = this;
  op.write = write;
  op.local = local.data() + local_offset;
  op.remote = remote;
  op.remote_offset = remote_offset;
  op.length = length;
  op.done = std::move(done);
  if (length <= transport_->inline_copy_bytes()) {
    // Small: copy now on this thread (no wait for the progress thread);
    // only the completion goes there, as the contract requires.
    op.result = PinAndCopy(write, op.local, remote, remote_offset, length);
    op.copied = true;
  }
  transport_->Enqueue(std::move(op));
  return Status::OK();
}

Status ShmConnection::RunOp(const OneSidedOp& op) {
  Status result = op.result;
  if (!op.copied) {
    RETURN_IF_ERROR(status());
    result = PinAndCopy(op.write, op.local, op.remote, op.remote_offset, op.length);
  }
  // The connection fails here, on the progress thread, also for a copy the
  // poster made: on_peer_error never runs inside Post*. A failure since a
  // successful copy still ends the operation (sticky error).
  if (!result.ok()) Fail(result);
  return failed_.load(std::memory_order_acquire) ? status() : result;
}

Status ShmConnection::PinAndCopy(bool write, uint8_t* local, const RemoteKey& remote,
                                 uint64_t remote_offset, size_t length) {
  const uint64_t address = remote.address + remote_offset;
  StatusOr<uint32_t> slot = peer_table_->Pin(remote.rkey, address, length,
                                             write ? kAccessRemoteWrite : kAccessRemoteRead);
  if (!slot.ok()) return slot.status();
  Status copied;
  const RegionMemfd memfd = peer_table_->PinnedMemfd(*slot);
  std::shared_ptr<SharedMapping> mapping;
  uint64_t at = 0;  // the copy's offset in the memfd
  if (memfd.fd >= 0) {
    at = memfd.offset + (address - peer_table_->PinnedAddress(*slot));
    mapping = PeerMapping(remote.rkey, memfd, at + length);
  }
  if (mapping != nullptr) {
    // The region lives in a memfd mapped here too: a plain copy in this
    // address space (the entry stays pinned, so the owner has not
    // deregistered it).
    uint8_t* theirs = mapping->data() + at;
    if (write) {
      std::memcpy(theirs, local, length);
    } else {
      std::memcpy(local, theirs, length);
    }
  } else {
    copied = Copy(write, local, address, length);
  }
  peer_table_->Unpin(*slot);
  return copied;
}

std::shared_ptr<SharedMapping> ShmConnection::PeerMapping(uint32_t rkey,
                                                          const RegionMemfd& memfd,
                                                          uint64_t end) {
  std::lock_guard<std::mutex> lock(mappings_mutex_);
  auto found = mappings_.find(memfd.inode);
  if (found != mappings_.end()) {
    MappedMemfd& mapped = found->second;
    if (end > mapped.mapping->size()) return nullptr;  // beyond it: let the kernel copy refuse
    if (std::find(mapped.rkeys.begin(), mapped.rkeys.end(), rkey) == mapped.rkeys.end()) {
      mapped.rkeys.push_back(rkey);
    }
    return mapped.mapping;
  }
  if (mapping_refused_) return nullptr;
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  if (pidfd_ < 0) {
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, peer_pid_, 0));
    if (pidfd_ < 0) {
      mapping_refused_ = true;
      LOG(INFO) << "shm: pidfd_open of rank " << peer_rank_ << " (pid " << peer_pid_
                << "): " << std::strerror(errno) << "; copies take cross-memory attach";
      return nullptr;
    }
  }
  const int mine = static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd_, memfd.fd, 0));
  if (mine < 0) {
    mapping_refused_ = true;
    LOG(INFO) << "shm: pidfd_getfd from rank " << peer_rank_ << ": " << std::strerror(errno)
              << "; copies take cross-memory attach";
    return nullptr;
  }
  StatusOr<std::unique_ptr<SharedMapping>> adopted =
      SharedMapping::Adopt(mine, end, "rank " + std::to_string(peer_rank_));
  if (!adopted.ok() || (*adopted)->inode() != memfd.inode) {
    // Not what its entry claims; cross-memory attach still checks the
    // range against the entry, so fall back for this region.
    LOG(WARNING) << "shm: region 0x" << std::hex << rkey << std::dec << " of rank " << peer_rank_
                 << ": "
                 << (adopted.ok() ? std::string("its descriptor is another memfd")
                                  : adopted.status().ToString())
                 << "; copying with cross-memory attach";
    return nullptr;
  }
  (*adopted)->CloseFd();  // the mapping keeps the memfd
  // Drop memfds none of whose regions the peer still has registered (their
  // pages stay allocated while mapped here).
  if (mappings_.size() >= 8) {
    for (auto it = mappings_.begin(); it != mappings_.end();) {
      std::vector<uint32_t>& keys = it->second.rkeys;
      keys.erase(std::remove_if(keys.begin(), keys.end(),
                                [this](uint32_t key) { return !peer_table_->IsLive(key); }),
                 keys.end());
      it = keys.empty() ? mappings_.erase(it) : std::next(it);
    }
  }
  std::shared_ptr<SharedMapping> mapping(std::move(*adopted));
  mappings_[memfd.inode] = MappedMemfd{mapping, {rkey}};
  return mapping;
#else
  mapping_refused_ = true;
  return nullptr;
#endif
}

Status ShmConnection::Copy(bool write, uint8_t* local, uint64_t remote_address, size_t length) {
  size_t done = 0;
  while (done < length) {
    iovec mine{local + done, length - done};
    iovec theirs{reinterpret_cast<void*>(remote_address + done), length - done};
    const ssize_t moved = write ? ::process_vm_writev(peer_pid_, &mine, 1, &theirs, 1, 0)
                                : ::process_vm_readv(peer_pid_, &mine, 1, &theirs, 1, 0);
    if (moved > 0) {
      done += static_cast<size_t>(moved);
      continue;
    }
    if (moved < 0 && errno == EINTR) continue;
    const int error = moved < 0 ? errno : EFAULT;
    if (error == ESRCH) {
      return UnavailableError("rank ", peer_rank_, " (pid ", peer_pid_,
                              ") is gone: its process exited or was killed");
    }
    if (error == EPERM) {
      return PermissionDeniedError(
          "cross-memory attach to rank ", peer_rank_, " (pid ", peer_pid_,
          ") refused (EPERM): the ranks must run as one user and ptrace must be allowed "
          "(kernel.yama.ptrace_scope, container seccomp); use --comm tcp otherwise");
    }
    return UnavailableError("cross-memory ", write ? "write to" : "read from", " rank ", peer_rank_,
                            " failed at byte ", done, ": ", std::strerror(error));
  }
  return Status::OK();
}

void ShmConnection::OpDone() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++ops_completed_;
  }
  changed_.notify_all();
}

Status ShmConnection::SendMessage(const void* data, size_t size) {
  return SendMessageParts(data, size, nullptr, 0);
}

Status ShmConnection::SendMessageParts(const void* head, size_t head_size, const void* body,
                                       size_t body_size) {
  const size_t size = head_size + body_size;
  if (size > max_message_size()) {
    return InvalidArgumentError("message of ", size, " bytes to rank ", peer_rank_,
                                " exceeds the maximum of ", max_message_size());
  }
  bool pushed = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!status_.ok()) return status_;
    if (backlog_.empty() && TryPushLocked(head, head_size, body, body_size)) {
      pushed = true;
    } else {
      if (backlog_.size() >= static_cast<size_t>(transport_->options().max_backlog_messages)) {
        return ResourceExhaustedError("backlog to rank ", peer_rank_, " is full (", backlog_.size(),
                                      " messages waiting for credits)");
      }
      std::string& queued = backlog_.emplace_back(static_cast<const char*>(head), head_size);
      if (body_size > 0) queued.append(static_cast<const char*>(body), body_size);
      backlog_size_.store(backlog_.size(), std::memory_order_seq_cst);
    }
    ++sent_;
  }
  if (pushed) {
    RingPeerIfSleeping();
  } else {
    transport_->Wake();
  }
  return Status::OK();
}

Status ShmConnection::SendMessages(std::vector<std::string> messages) {
  RETURN_IF_ERROR(CheckBatchSizes(messages));
  bool pushed = false, backlogged = false;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!status_.ok()) return status_;
    for (std::string& message : messages) {
      if (backlog_.empty() && TryPushLocked(message.data(), message.size())) {
        pushed = true;
      } else {
        if (backlog_.size() >= static_cast<size_t>(transport_->options().max_backlog_messages)) {
          status = ResourceExhaustedError("backlog to rank ", peer_rank_, " is full (",
                                          backlog_.size(), " messages waiting for credits)");
          break;
        }
        backlog_.push_back(std::move(message));
        backlog_size_.store(backlog_.size(), std::memory_order_seq_cst);
        backlogged = true;
      }
      ++sent_;
    }
  }
  if (pushed) RingPeerIfSleeping();
  if (backlogged) transport_->Wake();
  return status;
}

bool ShmConnection::TryPushLocked(const void* head, size_t head_size, const void* body,
                                  size_t body_size) {
  const uint64_t tail = out_ring_->tail.value.load(std::memory_order_acquire);
  TsanAcquire(CreditKey(side_));
  if (out_head_ - tail >= slots_) return false;
  // The consumer is done with every message below `tail`: of the
  // InFlight() messages holding a buffer, only out_head_ - tail still do.
  out_buffers_.Free(out_buffers_.InFlight() - static_cast<size_t>(out_head_ - tail));
  // A credit means fewer than `slots` messages hold a buffer: one is free.
  const uint32_t buffer = head_size + body_size <= kHotSlotMaxBytes
                              ? out_buffers_.TakeFreedLast()
                              : out_buffers_.TakeFreedFirst();
  uint8_t* payload = out_slots_ + size_t{buffer} * slot_size_ + kSlotHeaderSize;
  if (head_size > 0) std::memcpy(payload, head, head_size);
  if (body_size > 0) std::memcpy(payload + head_size, body, body_size);
  uint8_t* descriptor = out_slots_ + (out_head_ % slots_) * slot_size_;
  wire::StoreU32(descriptor, static_cast<uint32_t>(head_size + body_size));
  wire::StoreU32(descriptor + 4, buffer);
  ++out_head_;
  TsanRelease(MessageKey(side_));
  out_ring_->head.value.store(out_head_, std::memory_order_seq_cst);
  return true;
}

void ShmConnection::RingPeerIfSleeping() {
  if (header_->sleeping[1 - side_].value.load(std::memory_order_seq_cst) != 0) {
    ::eventfd_write(peer_doorbell_fd_, 1);
  }
}

bool ShmConnection::HasInbound() const {
  return in_ring_->head.value.load(std::memory_order_seq_cst) != in_tail_;
}

void ShmConnection::SetSleeping(bool sleeping) {
  header_->sleeping[side_].value.store(sleeping ? 1 : 0, std::memory_order_seq_cst);
}

bool ShmConnection::PollInbound() {
  const uint64_t head = in_ring_->head.value.load(std::memory_order_acquire);
  if (head == in_tail_) return false;
  TsanAcquire(MessageKey(1 - side_));
  const MessageHandler& handler = transport_->options().on_message;
  while (in_tail_ < head) {
    if (failed_.load(std::memory_order_acquire)) return true;
    const uint8_t* descriptor = in_slots_ + (in_tail_ % slots_) * slot_size_;
    const uint32_t size = wire::LoadU32(descriptor);
    const uint32_t buffer = wire::LoadU32(descriptor + 4);
    if (size > max_message_size() || buffer >= slots_) {
      Fail(DataLossError("rank ", peer_rank_, " published a ", size, "-byte message in slot ",
                         buffer, " of a ring of ", slots_, " slots of ", max_message_size(),
                         " bytes"));
      return true;
    }
    if (handler) {
      handler(peer_rank_, in_slots_ + size_t{buffer} * slot_size_ + kSlotHeaderSize, size);
    }
    ++in_tail_;
    TsanRelease(CreditKey(1 - side_));
    in_ring_->tail.value.store(in_tail_, std::memory_order_seq_cst);
  }
  RingPeerIfSleeping();
  return true;
}

bool ShmConnection::HasOutboundWork() const {
  if (backlog_size_.load(std::memory_order_seq_cst) == 0) return false;
  const uint64_t tail = out_ring_->tail.value.load(std::memory_order_seq_cst);
  const uint64_t head = out_ring_->head.value.load(std::memory_order_relaxed);
  return head - tail < slots_;
}

bool ShmConnection::PollOutbound(Clock::time_point now) {
  if (failed_.load(std::memory_order_acquire)) return false;
  bool moved = false;
  if (backlog_size_.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!backlog_.empty() && TryPushLocked(backlog_.front().data(), backlog_.front().size())) {
      backlog_.pop_front();
      moved = true;
    }
    backlog_size_.store(backlog_.size(), std::memory_order_relaxed);
  }
  if (moved) RingPeerIfSleeping();
  // Credit watch without the lock: our own ring's head (published by the
  // senders) and the tail the peer returns.
  const uint64_t tail = out_ring_->tail.value.load(std::memory_order_acquire);
  const uint64_t head = out_ring_->head.value.load(std::memory_order_acquire);
  if (tail != last_out_tail_ || head == tail) {
    if (tail != last_out_tail_ && flush_waiters_.load(std::memory_order_acquire) > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      changed_.notify_all();
    }
    last_out_tail_ = tail;
    last_credit_ = now;
    return moved;
  }
  const auto timeout = transport_->options().peer_timeout;
  if (now - last_credit_ > timeout) {
    Fail(DeadlineExceededError("rank ", peer_rank_, " consumed no message for ", timeout.count(),
                               " ms (process stopped or hung?)"));
  }
  return moved;
}

Status ShmConnection::Flush(Deadline deadline) {
  flush_waiters_.fetch_add(1);
  struct Leave {
    std::atomic<int>* count;
    ~Leave() { count->fetch_sub(1); }
  } leave{&flush_waiters_};
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t messages = sent_;
  const uint64_t ops = ops_posted_;
  while (true) {
    if (!status_.ok()) return status_;
    const uint64_t tail = out_ring_->tail.value.load(std::memory_order_acquire);
    TsanAcquire(CreditKey(side_));
    if (tail >= messages && ops_completed_ >= ops) return Status::OK();
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("flushing the connection to rank ", peer_rank_, ": ",
                                   messages - std::min(messages, tail), " messages and ",
                                   ops - std::min(ops, ops_completed_), " operations pending");
    }
    // The progress thread notifies when it sees credits come back; the
    // short bound covers a tail that moved while it slept.
    changed_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(1)));
  }
}

}  // namespace shm
}  // namespace comm
}  // namespace oflite
