#include "oneflow_lite/comm/memory/bounce_buffers.h"

#include <algorithm>
#include <cstring>
#include <deque>

#include "oneflow_lite/comm/wire.h"
#include "oneflow_lite/common/thread_name.h"

namespace oflite {
namespace comm {

// ----------------------------------------------------------- BounceStreams
//
// Wire (little-endian, on options.channel):
//   ANNOUNCE: u64 stream.first, u64 stream.second, u64 payload, u64 total,
//             u64 chunk_offset, u64 chunk_bytes, u32 slot, RemoteKey (24 B)
// and on options.channel | kReplyBit:
//   RELEASE:  u64 stream.first, u64 stream.second, u32 slot

namespace {

constexpr size_t kBufferAlignment = 64;
constexpr std::chrono::milliseconds kMonitorPeriod{20};

std::string StreamName(int peer, const BounceStreamId& stream) {
  return "bounce stream (" + std::to_string(stream.first) + ", " +
         std::to_string(stream.second) + ") with rank " + std::to_string(peer);
}

}  // namespace

struct BounceStreams::Sender {
  struct Job {
    uint64_t payload;
    std::vector<ConstSegment> segments;
    uint64_t total;
    uint64_t copied = 0;
  };
  int peer = 0;
  BounceStreamId id;
  Connection* connection = nullptr;
  size_t buffer_size = 0;
  // Transport::AllocateRegistered: owns the buffers (shm: a memfd the
  // consumer maps, so its READs are plain copies).
  std::unique_ptr<MemoryRegion> region;
  std::mutex mutex;
  std::vector<bool> busy;      // guarded by mutex
  std::deque<Job> jobs;        // guarded by mutex
  uint64_t next_payload = 0;   // guarded by mutex
  Status error;                // guarded by mutex; sticky
};

struct BounceStreams::Chunk {
  uint64_t payload;
  uint64_t total;
  uint64_t offset;
  uint64_t bytes;
  uint32_t slot;
  RemoteKey key;
};

struct BounceStreams::Pulling {
  uint64_t payload;
  uint64_t total;
  const MemoryRegion* region;
  std::vector<RegionSegment> segments;
  std::function<void(const Status&)> done;
  Deadline deadline;
  uint64_t posted = 0;    // bytes whose READs were posted
  uint64_t received = 0;  // bytes whose READs completed
  Status status;
  bool finished = false;
};

struct BounceStreams::Receiver {
  int peer = 0;
  BounceStreamId id;
  Connection* connection = nullptr;
  std::mutex mutex;
  std::deque<Chunk> queue;          // guarded by mutex
  bool have_last = false;           // the last announced chunk, for checks
  uint64_t last_payload = 0, last_end = 0, last_total = 0;
  std::shared_ptr<Pulling> pull;    // guarded by mutex; the pull in progress
  Status error;                     // guarded by mutex; sticky protocol error
};

BounceStreams::BounceStreams(Transport* transport, MessageRouter* router,
                             const BounceStreamOptions& options,
                             StrategyCounters* counters,
                             std::function<void(const Status&)> on_error)
    : transport_(transport),
      router_(router),
      options_(options),
      counters_(counters),
      on_error_(std::move(on_error)) {}

StatusOr<std::unique_ptr<BounceStreams>> BounceStreams::Create(
    Transport* transport, MessageRouter* router,
    const BounceStreamOptions& options, StrategyCounters* counters,
    std::function<void(const Status&)> on_error) {
  if (options.buffer_count < 1 || options.buffer_size == 0 ||
      (options.channel & kReplyBit) || options.pull_timeout.count() <= 0) {
    return InvalidArgumentError(
        "bounce streams on channel ", options.channel,
        ": need at least one buffer of one byte and a positive pull timeout");
  }
  std::unique_ptr<BounceStreams> streams(
      new BounceStreams(transport, router, options, counters, std::move(on_error)));
  BounceStreams* raw = streams.get();
  router->SetHandler(options.channel, [raw](int peer, const void* data, size_t size) {
    raw->OnAnnounce(peer, data, size);
  });
  router->SetHandler(options.channel | kReplyBit,
                     [raw](int peer, const void* data, size_t size) {
                       raw->OnRelease(peer, data, size);
                     });
  streams->monitor_ = std::thread([raw] {
    NameThisThread("oflite-bounce");
    raw->Monitor();
  });
  return streams;
}

BounceStreams::~BounceStreams() {
  {
    std::lock_guard<std::mutex> lock(monitor_mutex_);
    stopping_ = true;
  }
  monitor_wake_.notify_all();
  monitor_.join();
  router_->RemoveHandler(options_.channel);
  router_->RemoveHandler(options_.channel | kReplyBit);
}

size_t BounceStreams::queued_chunks() const {
  std::vector<std::shared_ptr<Receiver>> receivers;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    for (const auto& entry : receivers_) receivers.push_back(entry.second);
  }
  size_t count = 0;
  for (const auto& receiver : receivers) {
    std::lock_guard<std::mutex> lock(receiver->mutex);
    count += receiver->queue.size();
  }
  return count;
}

// ------------------------------------------------------ producer side

StatusOr<std::shared_ptr<BounceStreams::Sender>> BounceStreams::SenderFor(
    int peer, const BounceStreamId& stream, size_t max_payload) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  auto found = senders_.find({peer, stream});
  if (found != senders_.end()) return found->second;
  auto sender = std::make_shared<Sender>();
  sender->peer = peer;
  sender->id = stream;
  ASSIGN_OR_RETURN(sender->connection, transport_->GetConnection(peer));
  const size_t wanted = std::max<size_t>(1, std::min(options_.buffer_size, max_payload));
  sender->buffer_size = (wanted + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  const size_t bytes = sender->buffer_size * static_cast<size_t>(options_.buffer_count);
  StatusOr<std::unique_ptr<MemoryRegion>> region =
      transport_->AllocateRegistered(bytes, kAccessLocalWrite | kAccessRemoteRead);
  if (!region.ok()) {
    return region.status().WithContext(StreamName(peer, stream) + ": " + std::to_string(bytes) +
                                       " bytes of bounce buffers");
  }
  sender->region = std::move(*region);
  if (counters_) ++counters_->registrations;
  sender->busy.assign(options_.buffer_count, false);
  senders_[{peer, stream}] = sender;
  return sender;
}

StatusOr<uint64_t> BounceStreams::Enqueue(int peer, const BounceStreamId& stream,
                                          std::vector<ConstSegment> segments,
                                          size_t max_payload) {
  ASSIGN_OR_RETURN(std::shared_ptr<Sender> sender, SenderFor(peer, stream, max_payload));
  uint64_t total = 0;
  for (const ConstSegment& segment : segments) total += segment.size;
  std::lock_guard<std::mutex> lock(sender->mutex);
  RETURN_IF_ERROR(sender->error);
  RETURN_IF_ERROR(sender->connection->status());
  const uint64_t payload = sender->next_payload++;
  if (total == 0) return payload;
  segments.erase(std::remove_if(segments.begin(), segments.end(),
                                [](const ConstSegment& s) { return s.size == 0; }),
                 segments.end());
  sender->jobs.push_back(Sender::Job{payload, std::move(segments), total});
  RETURN_IF_ERROR(PumpLocked(sender.get()));
  return payload;
}

// Copies the next chunks of the queued payloads into free buffers and
// announces them.
Status BounceStreams::PumpLocked(Sender* sender) {
  while (!sender->jobs.empty() && sender->error.ok()) {
    auto free = std::find(sender->busy.begin(), sender->busy.end(), false);
    if (free == sender->busy.end()) break;
    const uint32_t slot = static_cast<uint32_t>(free - sender->busy.begin());
    Sender::Job& job = sender->jobs.front();
    const uint64_t chunk = std::min<uint64_t>(sender->buffer_size, job.total - job.copied);
    uint8_t* buffer = sender->region->data() + slot * sender->buffer_size;
    // Gather [copied, copied + chunk) of the segments' concatenation.
    uint64_t position = 0, written = 0;
    for (const ConstSegment& segment : job.segments) {
      const uint64_t begin = std::max(position, job.copied);
      const uint64_t end = std::min(position + segment.size, job.copied + chunk);
      if (begin < end) {
        std::memcpy(buffer + written, static_cast<const uint8_t*>(segment.data) + (begin - position),
                    end - begin);
        written += end - begin;
      }
      position += segment.size;
      if (position >= job.copied + chunk) break;
    }
    RemoteKey key = sender->region->remote_key();
    key.address += slot * sender->buffer_size;
    key.length = chunk;  // only the valid bytes are readable
    std::string bytes;
    wire::AppendU64(&bytes, sender->id.first);
    wire::AppendU64(&bytes, sender->id.second);
    wire::AppendU64(&bytes, job.payload);
    wire::AppendU64(&bytes, job.total);
    wire::AppendU64(&bytes, job.copied);
    wire::AppendU64(&bytes, chunk);
    wire::AppendU32(&bytes, slot);
    bytes += key.Encode();
    // Counted before the announcement: a fast peer (shm) may pull the chunk
    // and its owner read the counters before Send returns.
    if (counters_) {
      counters_->bytes_copied += chunk;
      ++counters_->transfers;
    }
    Status sent = MessageRouter::Send(sender->connection, options_.channel, bytes);
    if (!sent.ok()) {
      sender->error = sent.WithContext(StreamName(sender->peer, sender->id));
      sender->jobs.clear();
      return sender->error;
    }
    sender->busy[slot] = true;
    job.copied += chunk;
    if (job.copied == job.total) sender->jobs.pop_front();
  }
  return sender->error;
}

void BounceStreams::OnRelease(int peer, const void* data, size_t size) {
  wire::Reader reader(data, size);
  BounceStreamId stream;
  uint32_t slot = 0;
  reader.ReadU64(&stream.first);
  reader.ReadU64(&stream.second);
  reader.ReadU32(&slot);
  std::shared_ptr<Sender> sender;
  if (reader.ok() && reader.remaining() == 0) {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    auto found = senders_.find({peer, stream});
    if (found != senders_.end()) sender = found->second;
  }
  Status status;
  if (sender == nullptr) {
    status = DataLossError("rank ", peer, " sent a malformed bounce release or one for ",
                           StreamName(peer, stream), " that this rank never sent on");
  } else {
    std::lock_guard<std::mutex> lock(sender->mutex);
    if (slot >= sender->busy.size() || !sender->busy[slot]) {
      sender->error = DataLossError(StreamName(peer, stream), ": buffer ", slot,
                                    " released but not in use");
      sender->jobs.clear();
      status = sender->error;
    } else {
      sender->busy[slot] = false;
      status = PumpLocked(sender.get());
    }
  }
  if (!status.ok() && on_error_) on_error_(status);
}

// ------------------------------------------------------ consumer side

std::shared_ptr<BounceStreams::Receiver> BounceStreams::ReceiverFor(
    int peer, const BounceStreamId& stream, Connection* connection) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  std::shared_ptr<Receiver>& receiver = receivers_[{peer, stream}];
  if (receiver == nullptr) {
    receiver = std::make_shared<Receiver>();
    receiver->peer = peer;
    receiver->id = stream;
    receiver->connection = connection;
  }
  return receiver;
}

void BounceStreams::OnAnnounce(int peer, const void* data, size_t size) {
  wire::Reader reader(data, size);
  BounceStreamId stream;
  Chunk chunk;
  reader.ReadU64(&stream.first);
  reader.ReadU64(&stream.second);
  reader.ReadU64(&chunk.payload);
  reader.ReadU64(&chunk.total);
  reader.ReadU64(&chunk.offset);
  reader.ReadU64(&chunk.bytes);
  reader.ReadU32(&chunk.slot);
  StatusOr<RemoteKey> key = DataLossError("truncated");
  if (reader.ok() && reader.remaining() == RemoteKey::kEncodedSize) {
    key = RemoteKey::Decode(std::string(static_cast<const char*>(data) + (size - reader.remaining()),
                                        reader.remaining()));
  }
  StatusOr<Connection*> connection = transport_->GetConnection(peer);
  if (!reader.ok() || !key.ok() || !connection.ok()) {
    if (on_error_) on_error_(DataLossError("rank ", peer, " sent a malformed bounce announcement"));
    return;
  }
  chunk.key = *key;
  std::shared_ptr<Receiver> receiver = ReceiverFor(peer, stream, *connection);
  std::shared_ptr<Pulling> finished;
  {
    std::lock_guard<std::mutex> lock(receiver->mutex);
    const bool continues = receiver->have_last && chunk.payload == receiver->last_payload;
    const bool starts = (!receiver->have_last || (chunk.payload > receiver->last_payload &&
                                                  receiver->last_end == receiver->last_total)) &&
                        chunk.offset == 0;
    const bool in_order = continues ? (chunk.offset == receiver->last_end &&
                                       chunk.total == receiver->last_total)
                                    : starts;
    if (!in_order || chunk.bytes == 0 || chunk.offset > chunk.total ||
        chunk.bytes > chunk.total - chunk.offset || chunk.key.length != chunk.bytes) {
      if (receiver->error.ok()) {
        receiver->error = DataLossError(StreamName(peer, stream), ": chunk of payload ",
                                        chunk.payload, " at ", chunk.offset, " (", chunk.bytes,
                                        " of ", chunk.total, " bytes) out of order or malformed");
      }
    } else {
      receiver->have_last = true;
      receiver->last_payload = chunk.payload;
      receiver->last_end = chunk.offset + chunk.bytes;
      receiver->last_total = chunk.total;
      receiver->queue.push_back(chunk);
    }
    finished = DriveLocked(receiver);
  }
  if (finished != nullptr) finished->done(finished->status);
}

Status BounceStreams::Pull(int peer, const BounceStreamId& stream, uint64_t payload,
                           uint64_t total, const MemoryRegion* region,
                           std::vector<RegionSegment> segments,
                           std::function<void(const Status&)> done) {
  uint64_t sum = 0;
  for (const RegionSegment& segment : segments) {
    if (region == nullptr || segment.offset > region->size() ||
        segment.size > region->size() - segment.offset) {
      return InvalidArgumentError(StreamName(peer, stream), ": payload ", payload,
                                  " segment at ", segment.offset, " of ", segment.size,
                                  " bytes outside the destination region");
    }
    sum += segment.size;
  }
  if (sum != total) {
    return InvalidArgumentError(StreamName(peer, stream), ": payload ", payload, " of ", total,
                                " bytes into segments of ", sum);
  }
  ASSIGN_OR_RETURN(Connection * connection, transport_->GetConnection(peer));
  RETURN_IF_ERROR(connection->status());
  if (total == 0) {
    done(Status::OK());
    return Status::OK();
  }
  std::shared_ptr<Receiver> receiver = ReceiverFor(peer, stream, connection);
  auto pull = std::make_shared<Pulling>();
  pull->payload = payload;
  pull->total = total;
  pull->region = region;
  pull->segments = std::move(segments);
  pull->done = std::move(done);
  pull->deadline = DeadlineAfter(options_.pull_timeout);
  std::shared_ptr<Pulling> finished;
  {
    std::lock_guard<std::mutex> lock(receiver->mutex);
    if (receiver->pull != nullptr) {
      return FailedPreconditionError(StreamName(peer, stream), ": payload ", payload,
                                     " pulled while payload ", receiver->pull->payload,
                                     " is in progress");
    }
    RETURN_IF_ERROR(receiver->error);
    receiver->pull = pull;
    finished = DriveLocked(receiver);
  }
  if (finished != nullptr) finished->done(finished->status);
  return Status::OK();
}

std::shared_ptr<BounceStreams::Pulling> BounceStreams::DriveLocked(
    const std::shared_ptr<Receiver>& receiver) {
  std::shared_ptr<Pulling> pull = receiver->pull;
  if (pull == nullptr) return nullptr;
  if (!receiver->error.ok() && pull->status.ok()) pull->status = receiver->error;
  while (pull->status.ok() && !receiver->queue.empty() && pull->posted < pull->total) {
    const Chunk chunk = receiver->queue.front();
    if (chunk.payload != pull->payload || chunk.offset != pull->posted ||
        chunk.total != pull->total) {
      pull->status = DataLossError(StreamName(receiver->peer, receiver->id), ": expected payload ",
                                   pull->payload, " (", pull->total, " bytes) at ", pull->posted,
                                   ", the producer announced payload ", chunk.payload, " (",
                                   chunk.total, " bytes) at ", chunk.offset);
      break;
    }
    receiver->queue.pop_front();
    // One READ per destination segment the chunk overlaps.
    auto remaining = std::make_shared<int>(0);
    std::vector<std::pair<RegionSegment, uint64_t>> reads;  // (local, remote offset)
    uint64_t position = 0;
    for (const RegionSegment& segment : pull->segments) {
      const uint64_t begin = std::max(position, chunk.offset);
      const uint64_t end = std::min(position + segment.size, chunk.offset + chunk.bytes);
      if (begin < end) {
        reads.push_back({{segment.offset + (begin - position), end - begin}, begin - chunk.offset});
      }
      position += segment.size;
    }
    *remaining = static_cast<int>(reads.size());
    StrategyCounters* counters = counters_;
    const uint32_t channel = options_.channel;
    for (const auto& [local, remote_offset] : reads) {
      Status posted = receiver->connection->PostRead(
          *pull->region, local.offset, chunk.key, remote_offset, local.size,
          [receiver, pull, remaining, chunk, counters, channel](const Status& status) {
            OnChunkRead(counters, channel, receiver, pull, remaining, chunk, status);
          });
      if (!posted.ok()) {
        pull->status = posted.WithContext(StreamName(receiver->peer, receiver->id));
        break;
      }
    }
    pull->posted += chunk.bytes;
  }
  const bool complete = pull->received == pull->total;
  if (!pull->status.ok() || complete) {
    receiver->pull = nullptr;
    pull->finished = true;
    return pull;
  }
  return nullptr;
}

void BounceStreams::OnChunkRead(StrategyCounters* counters, uint32_t channel,
                                const std::shared_ptr<Receiver>& receiver,
                                const std::shared_ptr<Pulling>& pull,
                                const std::shared_ptr<int>& remaining, const Chunk& chunk,
                                const Status& status) {
  {
    std::lock_guard<std::mutex> lock(receiver->mutex);
    if (pull->finished) return;
    if (!status.ok() && pull->status.ok()) {
      pull->status = status.WithContext(StreamName(receiver->peer, receiver->id));
    }
    if (--*remaining == 0 && pull->status.ok()) {
      std::string release;
      wire::AppendU64(&release, receiver->id.first);
      wire::AppendU64(&release, receiver->id.second);
      wire::AppendU32(&release, chunk.slot);
      Status sent = MessageRouter::Send(receiver->connection, channel | kReplyBit, release);
      if (!sent.ok()) pull->status = sent.WithContext(StreamName(receiver->peer, receiver->id));
      pull->received += chunk.bytes;
      if (counters) {
        counters->bytes_moved += chunk.bytes;
        ++counters->transfers;
      }
    }
    if (pull->status.ok() && pull->received < pull->total) return;
    if (receiver->pull == pull) receiver->pull = nullptr;
    pull->finished = true;
  }
  pull->done(pull->status);
}

// Fails pulls whose connection failed or whose deadline passed, and
// producer streams whose connection failed, so nothing waits unboundedly.
void BounceStreams::Monitor() {
  std::unique_lock<std::mutex> wait_lock(monitor_mutex_);
  while (!stopping_) {
    monitor_wake_.wait_for(wait_lock, kMonitorPeriod);
    if (stopping_) break;
    std::vector<std::shared_ptr<Receiver>> receivers;
    std::vector<std::shared_ptr<Sender>> senders;
    {
      std::lock_guard<std::mutex> lock(streams_mutex_);
      for (const auto& entry : receivers_) receivers.push_back(entry.second);
      for (const auto& entry : senders_) senders.push_back(entry.second);
    }
    for (const auto& receiver : receivers) {
      std::shared_ptr<Pulling> failed;
      {
        std::lock_guard<std::mutex> lock(receiver->mutex);
        std::shared_ptr<Pulling> pull = receiver->pull;
        if (pull == nullptr) continue;
        Status status = receiver->connection->status();
        if (status.ok() && Clock::now() >= pull->deadline) {
          status = DeadlineExceededError(StreamName(receiver->peer, receiver->id), ": payload ",
                                         pull->payload, " has ", pull->received, " of ",
                                         pull->total, " bytes after ",
                                         options_.pull_timeout.count(), " ms");
        }
        if (status.ok()) continue;
        pull->status = status;
        pull->finished = true;
        receiver->pull = nullptr;
        failed = pull;
      }
      failed->done(failed->status);
    }
    for (const auto& sender : senders) {
      Status failed;
      {
        std::lock_guard<std::mutex> lock(sender->mutex);
        if (sender->jobs.empty() || !sender->error.ok()) continue;
        Status status = sender->connection->status();
        if (status.ok()) continue;
        sender->error = status.WithContext(StreamName(sender->peer, sender->id));
        sender->jobs.clear();
        failed = sender->error;
      }
      if (on_error_) on_error_(failed);
    }
  }
}

}  // namespace comm
}  // namespace oflite
