#include "oneflow_lite/comm/memory/bounce_buffers.h"

#include <cstring>

#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace {

// Waiting for a peer polls the connection's status at this period so a
// failed connection ends the wait promptly.
constexpr std::chrono::milliseconds kStatusPoll{20};

std::string EncodeAnnouncement(uint64_t sequence, uint32_t slot, uint64_t total,
                               uint64_t chunk_offset, uint64_t chunk_bytes,
                               const RemoteKey& key) {
  std::string bytes;
  wire::AppendU64(&bytes, sequence);
  wire::AppendU32(&bytes, slot);
  wire::AppendU64(&bytes, total);
  wire::AppendU64(&bytes, chunk_offset);
  wire::AppendU64(&bytes, chunk_bytes);
  bytes += key.Encode();
  return bytes;
}

}  // namespace

// ------------------------------------------------------------------ sender

BounceSender::BounceSender(Connection* connection, MessageRouter* router,
                           const BounceOptions& options,
                           StrategyCounters* counters)
    : connection_(connection),
      router_(router),
      options_(options),
      counters_(counters),
      busy_(options.buffer_count, false) {}

BounceSender::~BounceSender() { router_->RemoveHandler(options_.channel | kReplyBit); }

StatusOr<std::unique_ptr<BounceSender>> BounceSender::Create(
    Connection* connection, MessageRouter* router, RegisteredPool* pool,
    const BounceOptions& options, StrategyCounters* counters) {
  if (options.buffer_count < 1 || options.buffer_size == 0 ||
      (options.channel & kReplyBit)) {
    return InvalidArgumentError("bounce channel ", options.channel,
                                ": need at least one buffer of one byte");
  }
  std::unique_ptr<BounceSender> sender(
      new BounceSender(connection, router, options, counters));
  for (int i = 0; i < options.buffer_count; ++i) {
    ASSIGN_OR_RETURN(PoolBuffer buffer, pool->Allocate(options.buffer_size));
    sender->buffers_.push_back(std::move(buffer));
  }
  BounceSender* raw = sender.get();
  router->SetHandler(options.channel | kReplyBit,
                     [raw](int, const void* data, size_t size) {
                       raw->OnRelease(data, size);
                     });
  return sender;
}

void BounceSender::OnRelease(const void* data, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Reader reader(data, size);
  uint32_t slot = 0;
  reader.ReadU32(&slot);
  if (!reader.ok() || reader.remaining() != 0 || slot >= busy_.size() ||
      !busy_[slot]) {
    protocol_error_ = DataLossError("rank ", connection_->peer_rank(),
                                    " released bounce buffer ", slot,
                                    " that was not in use");
  } else {
    busy_[slot] = false;
  }
  released_.notify_all();
}

Status BounceSender::Send(const void* data, size_t size, Deadline deadline) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  size_t offset = 0;
  do {
    const size_t chunk = std::min(size - offset, options_.buffer_size);
    uint32_t slot = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (true) {
        RETURN_IF_ERROR(protocol_error_);
        RETURN_IF_ERROR(connection_->status());
        auto free = std::find(busy_.begin(), busy_.end(), false);
        if (free != busy_.end()) {
          slot = static_cast<uint32_t>(free - busy_.begin());
          busy_[slot] = true;
          break;
        }
        if (Clock::now() >= deadline) {
          return DeadlineExceededError("bounce send to rank ",
                                       connection_->peer_rank(),
                                       ": no buffer released in time");
        }
        released_.wait_until(lock, std::min(deadline, Clock::now() + kStatusPoll));
      }
    }
    PoolBuffer& buffer = buffers_[slot];
    if (chunk > 0) std::memcpy(buffer.data(), bytes + offset, chunk);
    if (counters_) {
      counters_->bytes_copied += chunk;
      ++counters_->transfers;
    }
    RemoteKey key = buffer.remote_key();
    key.length = chunk;  // only the valid bytes are readable
    RETURN_IF_ERROR(MessageRouter::Send(
        connection_, options_.channel,
        EncodeAnnouncement(sequence_++, slot, size, offset, chunk, key)));
    offset += chunk;
  } while (offset < size);
  return Status::OK();
}

// ---------------------------------------------------------------- receiver

BounceReceiver::BounceReceiver(Connection* connection, MessageRouter* router,
                               const BounceOptions& options,
                               StrategyCounters* counters)
    : connection_(connection),
      router_(router),
      options_(options),
      counters_(counters) {}

BounceReceiver::~BounceReceiver() { router_->RemoveHandler(options_.channel); }

StatusOr<std::unique_ptr<BounceReceiver>> BounceReceiver::Create(
    Connection* connection, MessageRouter* router, const BounceOptions& options,
    StrategyCounters* counters) {
  if (options.channel & kReplyBit) {
    return InvalidArgumentError("bounce channel ", options.channel,
                                " uses the reply bit");
  }
  std::unique_ptr<BounceReceiver> receiver(
      new BounceReceiver(connection, router, options, counters));
  BounceReceiver* raw = receiver.get();
  router->SetHandler(options.channel, [raw](int, const void* data, size_t size) {
    raw->OnAnnounce(data, size);
  });
  return receiver;
}

void BounceReceiver::OnAnnounce(const void* data, size_t size) {
  wire::Reader reader(data, size);
  Announcement announcement;
  reader.ReadU64(&announcement.sequence);
  reader.ReadU32(&announcement.slot);
  reader.ReadU64(&announcement.total);
  reader.ReadU64(&announcement.chunk_offset);
  reader.ReadU64(&announcement.chunk_bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = RemoteKey::Decode(std::string(
      static_cast<const char*>(data) + (size - reader.remaining()),
      reader.remaining()));
  if (!reader.ok() || !key.ok() ||
      announcement.sequence != expected_sequence_ ||
      announcement.chunk_offset > announcement.total ||
      announcement.chunk_bytes > announcement.total - announcement.chunk_offset ||
      key->length != announcement.chunk_bytes) {
    protocol_error_ = DataLossError("rank ", connection_->peer_rank(),
                                    " sent a malformed bounce announcement");
  } else {
    ++expected_sequence_;
    announcement.key = *key;
    queue_.push_back(announcement);
  }
  arrived_.notify_all();
}

StatusOr<BounceReceiver::Announcement> BounceReceiver::NextAnnouncement(
    Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (queue_.empty()) {
    RETURN_IF_ERROR(protocol_error_);
    RETURN_IF_ERROR(connection_->status());
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("bounce receive from rank ",
                                   connection_->peer_rank(),
                                   ": nothing announced in time");
    }
    arrived_.wait_until(lock, std::min(deadline, Clock::now() + kStatusPoll));
  }
  Announcement next = queue_.front();
  queue_.pop_front();
  return next;
}

Status BounceReceiver::Release(uint32_t slot) {
  std::string bytes;
  wire::AppendU32(&bytes, slot);
  return MessageRouter::Send(connection_, options_.channel | kReplyBit, bytes);
}

StatusOr<size_t> BounceReceiver::Receive(const MemoryRegion& destination,
                                         size_t offset, size_t capacity,
                                         Deadline deadline) {
  ASSIGN_OR_RETURN(Announcement first, NextAnnouncement(deadline));
  const uint64_t total = first.total;
  const bool fits = total <= capacity && offset <= destination.size() &&
                    total <= destination.size() - offset;
  Announcement current = first;
  uint64_t received = 0;
  while (true) {
    if (current.total != total || current.chunk_offset != received) {
      return DataLossError("rank ", connection_->peer_rank(),
                           " sent bounce chunks out of order");
    }
    if (fits && current.chunk_bytes > 0) {
      RETURN_IF_ERROR(ReadSync(connection_, destination,
                               offset + current.chunk_offset, current.key, 0,
                               current.chunk_bytes, deadline));
      if (counters_) {
        counters_->bytes_moved += current.chunk_bytes;
        ++counters_->transfers;
      }
    }
    RETURN_IF_ERROR(Release(current.slot));
    received += current.chunk_bytes;
    if (received == total) break;
    ASSIGN_OR_RETURN(current, NextAnnouncement(deadline));
  }
  if (!fits) {
    return OutOfRangeError("bounce payload of ", total, " bytes from rank ",
                           connection_->peer_rank(), " exceeds the capacity of ",
                           capacity, " bytes");
  }
  return static_cast<size_t>(total);
}

}  // namespace comm
}  // namespace oflite
