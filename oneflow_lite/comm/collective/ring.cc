#include "oneflow_lite/comm/collective/ring.h"

#include <optional>

#include "oneflow_lite/comm/memory/bounce_buffers.h"  // kReplyBit
#include "oneflow_lite/comm/spin_wait.h"
#include "oneflow_lite/comm/wire.h"
#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/common/trace/trace.h"

namespace oflite {
namespace comm {
namespace {

constexpr std::chrono::milliseconds kStatusPoll{20};

// Polls until `done()` (checked under `lock`) for at most `spin`
// (CollectiveOptions::wait_spin), yielding between checks as SpinWait says
// (comm/spin_wait.h: not at all while the host is oversubscribed), or with
// `poll` (wait_poll) driving `transport` (Transport::Poll: shm runs the
// neighbour's READY and the WRITEs' completions on this thread) and
// yielding only when that found nothing. `lock` is released while it
// waits. True when done; before returning false (the caller sleeps next)
// it ends polling, so the transport's progress thread takes over at once.
template <typename Done>
bool SpinBriefly(Transport* transport, bool poll, std::unique_lock<std::mutex>* lock,
                 std::chrono::microseconds spin, Done done) {
  SpinWait wait(spin);
  bool polled = false;
  while (!done()) {
    lock->unlock();  // the handlers and callbacks take it
    polled |= poll;
    const bool again = poll && transport->Poll() ? !wait.Expired() : wait.Idle();
    lock->lock();
    if (!again) {
      if (polled) transport->EndPolling();
      return done();
    }
  }
  return true;
}

enum MessageType : uint8_t {
  kReady = 1,       // forward: a chunk landed
  kScratchKey = 2,  // backward: where to write reduce chunks
  kDataKey = 3,     // backward: the buffer of this call (gather chunks)
  kAck = 4,         // backward: scratch slots consumed
};

// 0 for a dtype the ring cannot reduce.
size_t ElementSize(DataType dtype) {
  return CanAccumulate(dtype) ? static_cast<size_t>(SizeOf(dtype)) : 0;
}

// Adds `bytes` of `source` into `destination`; the dtype was checked at the
// start of the call (ElementSize), so a failure here is a programmer bug.
void Reduce(DataType dtype, uint8_t* destination, const uint8_t* source,
            size_t bytes) {
  const Status status = AccumulateInto(dtype, source, destination,
                                       static_cast<int64_t>(bytes / ElementSize(dtype)));
  CHECK(status.ok()) << status;
}

int Modulo(int value, int world) { return ((value % world) + world) % world; }

// The trace of one ring step on the calling thread's track (a collective
// actor's worker; docs/tracing.md), when it records: a "collective" slice,
// in which the flow of this step's data from the left neighbour ends and
// the flow of the next step's data to the right neighbour starts. Both
// ends compute a flow's id from (tag, call, step, sending rank).
class StepTrace {
 public:
  StepTrace(uint64_t tag, uint64_t call, size_t step, int rank, int world, bool sends_next) {
    trace::Track* track = trace::CurrentTrack();
    if (track == nullptr || !track->active()) return;
    track_ = track;
    step_ = step;
    begin_ns_ = trace::NowNs();
    const int left = Modulo(rank - 1, world);
    track->AddFlow('f', Id(tag, call, step, left), "ring", begin_ns_);
    if (sends_next) track->AddFlow('s', Id(tag, call, step + 1, rank), "ring", begin_ns_);
  }
  ~StepTrace() {
    if (track_ == nullptr) return;
    trace::EventRecord* event = track_->Append(1);
    event->category = "collective";
    event->begin_ns = begin_ns_;
    event->end_ns = trace::NowNs();
    event->format = &Format;  // the name too
    event->numbers()[0] = static_cast<int64_t>(step_);
  }
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // The flow of step 0's data, which is sent before the first step.
  static void FirstSend(uint64_t tag, uint64_t call, int rank) {
    trace::Track* track = trace::CurrentTrack();
    if (track != nullptr && track->active()) {
      track->AddFlow('s', Id(tag, call, 0, rank), "ring", trace::NowNs());
    }
  }

 private:
  static void Format(const trace::EventRecord& record, std::string* name, std::string* args) {
    *name = "ring step " + std::to_string(record.numbers()[0]);
    *args = "\"step\":" + std::to_string(record.numbers()[0]);
  }
  static uint64_t Id(uint64_t tag, uint64_t call, size_t step, int sender) {
    return trace::FlowId({static_cast<int64_t>(tag), static_cast<int64_t>(call),
                          static_cast<int64_t>(step), sender});
  }

  trace::Track* track_ = nullptr;
  size_t step_ = 0;
  int64_t begin_ns_ = 0;
};

const char* CollectiveName(RingCollective collective) {
  switch (collective) {
    case RingCollective::kAllReduce: return "all-reduce";
    case RingCollective::kReduceScatter: return "reduce-scatter";
    case RingCollective::kAllGather: return "all-gather";
  }
  return "collective";
}

}  // namespace

std::vector<RingStep> RingSchedule(RingCollective collective, int rank, int world) {
  std::vector<RingStep> steps;
  const bool reduce = collective != RingCollective::kAllGather;
  const bool gather = collective != RingCollective::kReduceScatter;
  // A reduce-scatter alone ends with segment r on rank r; inside an
  // all-reduce it ends with segment r + 1 on rank r, which the gather phase
  // then circulates.
  const int shift = collective == RingCollective::kReduceScatter ? 1 : 0;
  for (int k = 0; reduce && k < world - 1; ++k) {
    steps.push_back({Modulo(rank - k - shift, world), Modulo(rank - k - 1 - shift, world), true});
  }
  const int gather_shift = collective == RingCollective::kAllReduce ? 1 : 0;
  for (int j = 0; gather && j < world - 1; ++j) {
    steps.push_back(
        {Modulo(rank + gather_shift - j, world), Modulo(rank + gather_shift - j - 1, world), false});
  }
  return steps;
}

size_t RingBytesSent(RingCollective collective, size_t count, size_t element_bytes, int rank,
                     int world) {
  size_t sent = 0;
  for (const RingStep& step : RingSchedule(collective, rank, world)) {
    size_t begin = 0, end = 0;
    RingCommunicator::SegmentBounds(count, world, step.send_segment, &begin, &end);
    sent += (end - begin) * element_bytes;
  }
  return sent;
}

void RingCommunicator::SegmentBounds(size_t count, int world, int index,
                                     size_t* begin, size_t* end) {
  RingSegmentBounds(count, world, index, begin, end);
}

RingCommunicator::RingCommunicator(Transport* transport, MessageRouter* router,
                                   const CollectiveOptions& options, RankGroup group)
    : transport_(transport),
      router_(router),
      options_(options),
      group_(std::move(group)),
      rank_(group_.rank()),
      world_(group_.size()),
      scratch_slots_(static_cast<uint32_t>(options.slots)) {}

RingCommunicator::~RingCommunicator() {
  {
    // Completions still in flight (after a failure) must not outlive us.
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(10),
                      [&] { return sends_in_flight_ == 0; });
  }
  router_->RemoveHandler(options_.channel);
  router_->RemoveHandler(options_.channel | kReplyBit);
}

StatusOr<std::unique_ptr<RingCommunicator>> RingCommunicator::Create(
    Transport* transport, MessageRouter* router, RegisteredPool* pool,
    const CollectiveOptions& options) {
  if (options.slots < 1 || options.chunk_bytes < 8 ||
      (options.channel & kReplyBit)) {
    return InvalidArgumentError("collective options: need slots >= 1, "
                                "chunk_bytes >= 8 and a channel without the reply bit");
  }
  ASSIGN_OR_RETURN(RankGroup group, RankGroup::Make(options.members, transport->rank(),
                                                    transport->world_size(), "ring"));
  std::unique_ptr<RingCommunicator> ring(
      new RingCommunicator(transport, router, options, std::move(group)));
  if (ring->world_ > 1) RETURN_IF_ERROR(ring->Setup(pool));
  return ring;
}

Status RingCommunicator::Setup(RegisteredPool* pool) {
  ASSIGN_OR_RETURN(left_, transport_->GetConnection(LeftRank()));
  ASSIGN_OR_RETURN(right_, transport_->GetConnection(RightRank()));
  ASSIGN_OR_RETURN(scratch_, pool->Allocate(options_.chunk_bytes * options_.slots));
  router_->SetHandler(options_.channel, [this](int from, const void* data, size_t size) {
    if (FromNeighbour(from, LeftRank(), "READY")) OnForward(data, size);
  });
  router_->SetHandler(options_.channel | kReplyBit,
                      [this](int from, const void* data, size_t size) {
                        if (FromNeighbour(from, RightRank(), "ACK or key")) OnBackward(data, size);
                      });
  std::string message(1, static_cast<char>(kScratchKey));
  wire::AppendU64(&message, options_.tag);
  message += scratch_.remote_key().Encode();
  RETURN_IF_ERROR(
      MessageRouter::Send(left_, options_.channel | kReplyBit, message));
  const Deadline deadline = DeadlineAfter(options_.setup_timeout);
  BlockingWait blocking(transport_);  // waits without polling
  std::unique_lock<std::mutex> lock(mutex_);
  while (!have_right_scratch_) {
    RETURN_IF_ERROR(HealthLocked());
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("ring setup: rank ", RightRank(),
                                   " never sent its scratch key to rank ", transport_->rank());
    }
    changed_.wait_until(lock, std::min(deadline, Clock::now() + kStatusPoll));
  }
  return Status::OK();
}

Status RingCommunicator::HealthLocked() const {
  RETURN_IF_ERROR(error_);
  if (options_.cancel != nullptr) RETURN_IF_ERROR(options_.cancel->status());
  if (left_) RETURN_IF_ERROR(left_->status());
  if (right_) RETURN_IF_ERROR(right_->status());
  return Status::OK();
}

void RingCommunicator::FailLocked(const Status& status) {
  if (error_.ok()) error_ = status;
  changed_.notify_all();
}

bool RingCommunicator::FromNeighbour(int from, int neighbour, const char* what) {
  if (from == neighbour) return true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    FailLocked(DataLossError("ring on channel ", options_.channel, ": ", what, " message from rank ",
                             from, ", which is not this ring's neighbour (rank ", neighbour,
                             "); channel collision or different plans?"));
  }
  changed_.notify_all();
  return false;
}

void RingCommunicator::OnForward(const void* data, size_t size) {
  wire::Reader reader(data, size);
  uint8_t type = 0, in_scratch = 0;
  uint64_t sequence = 0, byte_offset = 0, bytes = 0;
  uint32_t slot = 0;
  reader.ReadU8(&type);
  reader.ReadU64(&sequence);
  reader.ReadU64(&byte_offset);
  reader.ReadU64(&bytes);
  reader.ReadU8(&in_scratch);
  reader.ReadU32(&slot);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!reader.ok() || reader.remaining() != 0 || type != kReady ||
        slot >= static_cast<uint32_t>(options_.slots) ||
        bytes > options_.chunk_bytes) {
      FailLocked(DataLossError("ring: malformed READY from rank ",
                               LeftRank()));
      return;
    }
    ready_[sequence] = Ready{byte_offset, bytes, in_scratch != 0, slot};
  }
  // Outside the lock: a waiter woken under it would only block on the mutex
  // (two more context switches per chunk). Safe: the destructor's
  // RemoveHandler waits for a running handler.
  changed_.notify_all();
}

void RingCommunicator::OnBackward(const void* data, size_t size) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    OnBackwardLocked(data, size);
  }
  changed_.notify_all();  // outside the lock, as in OnForward
}

void RingCommunicator::OnBackwardLocked(const void* data, size_t size) {
  wire::Reader reader(data, size);
  uint8_t type = 0;
  reader.ReadU8(&type);
  const int right = RightRank();
  if (type == kAck) {
    uint32_t count = 0;
    reader.ReadU32(&count);
    if (!reader.ok() || count > scratch_slots_.InFlight()) {
      FailLocked(DataLossError("ring: bad ACK from rank ", right));
      return;
    }
    scratch_slots_.Free(count);
  } else if (type == kScratchKey || type == kDataKey) {
    uint64_t call = 0, tag = 0;
    reader.ReadU64(type == kDataKey ? &call : &tag);
    if (!reader.ok() || reader.remaining() != RemoteKey::kEncodedSize) {
      FailLocked(DataLossError("ring: bad key message from rank ", right));
      return;
    }
    auto key = RemoteKey::Decode(std::string(
        static_cast<const char*>(data) + size - RemoteKey::kEncodedSize,
        RemoteKey::kEncodedSize));
    if (!key.ok()) {
      FailLocked(key.status().WithContext("ring: key from rank " + std::to_string(right)));
      return;
    }
    if (type == kScratchKey) {
      if (tag != options_.tag) {
        FailLocked(DataLossError("ring on channel ", options_.channel, ": rank ", right,
                                 " runs ring ", tag, " there but rank ", transport_->rank(), " runs ring ",
                                 options_.tag, " (channel collision or different plans?)"));
        return;
      }
      right_scratch_ = *key;
      have_right_scratch_ = true;
    } else {
      right_data_keys_[call] = *key;
    }
  } else {
    FailLocked(DataLossError("ring: unknown message ", int{type}, " from rank ", right));
    return;
  }
  PumpSendsLocked();
}

void RingCommunicator::QueueSendsLocked(const MemoryRegion& region, size_t offset,
                                        size_t begin_byte, size_t end_byte,
                                        bool to_scratch) {
  (void)region;
  (void)offset;
  for (size_t at = begin_byte; at < end_byte;) {
    const size_t bytes = std::min(end_byte - at, options_.chunk_bytes);
    send_queue_.push_back(SendItem{next_send_sequence_++, at, bytes, to_scratch});
    at += bytes;
  }
}

std::string RingCommunicator::ReadyMessage(const SendItem& item, uint32_t slot) {
  std::string ready(1, static_cast<char>(kReady));
  wire::AppendU64(&ready, item.sequence);
  wire::AppendU64(&ready, item.byte_offset);
  wire::AppendU64(&ready, item.bytes);
  wire::AppendU8(&ready, item.to_scratch ? 1 : 0);
  wire::AppendU32(&ready, slot);
  return ready;
}

void RingCommunicator::PumpSendsLocked() {
  while (!send_queue_.empty() && error_.ok() && send_region_ != nullptr) {
    const SendItem item = send_queue_.front();
    RemoteKey remote;
    size_t remote_offset = 0;
    uint32_t slot = 0;
    if (item.to_scratch) {
      if (!have_right_scratch_ || !scratch_slots_.HasFree()) {
        return;  // resumed by the next ACK
      }
      slot = scratch_slots_.TakeFreedLast();
      remote = right_scratch_;
      remote_offset = slot * options_.chunk_bytes;
    } else {
      auto key = right_data_keys_.find(call_);
      if (key == right_data_keys_.end()) return;  // resumed by its DATA_KEY
      remote = key->second;
      remote_offset = item.byte_offset;
    }
    // Where the connection keeps a message behind an outstanding WRITE
    // (tcp), READY leaves with the data; elsewhere after its completion.
    const bool ready_with_write = right_->OrdersMessagesAfterWrites();
    Connection* right = right_;
    const uint32_t channel = options_.channel;
    Status posted = right_->PostWrite(
        *send_region_, send_offset_ + item.byte_offset, remote, remote_offset,
        item.bytes,
        [this, item, slot, right, channel, ready_with_write](const Status& status) {
          Status result = status;
          if (result.ok() && !ready_with_write) {
            result = MessageRouter::Send(right, channel, ReadyMessage(item, slot));
          }
          std::lock_guard<std::mutex> lock(mutex_);
          if (!result.ok()) FailLocked(result);
          // Only the end of a call (and the destructor) waits for this: a
          // caller waiting for READY is not woken for nothing.
          if (--sends_in_flight_ == 0) changed_.notify_all();
        });
    if (!posted.ok()) {
      FailLocked(posted);
      return;
    }
    ++sends_in_flight_;
    send_queue_.pop_front();
    if (ready_with_write) {
      const Status sent = MessageRouter::Send(right_, channel, ReadyMessage(item, slot));
      if (!sent.ok()) {
        FailLocked(sent);
        return;
      }
    }
  }
}

StatusOr<RingCommunicator::Ready> RingCommunicator::WaitReady(uint64_t sequence,
                                                              Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  SpinBriefly(transport_, options_.wait_poll, &lock, options_.wait_spin,
              [&] { return ready_.count(sequence) != 0 || !error_.ok(); });
  while (true) {
    auto it = ready_.find(sequence);
    if (it != ready_.end()) {
      Ready ready = it->second;
      ready_.erase(it);
      return ready;
    }
    RETURN_IF_ERROR(HealthLocked());
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("ring collective on rank ", transport_->rank(),
                                   ": no data from rank ", LeftRank(),
                                   " before the deadline");
    }
    changed_.wait_until(lock, std::min(deadline, Clock::now() + kStatusPoll));
  }
}

Status RingCommunicator::Run(RingCollective collective,
                             const MemoryRegion& region, size_t offset,
                             size_t count, DataType dtype, Deadline deadline) {
  const std::vector<Step> steps = RingSchedule(collective, rank_, world_);
  trace::Slice traced("collective", CollectiveName(collective));
  // Without wait_poll this thread waits for the neighbours' READYs and its
  // WRITEs' completions without driving the transport: its progress thread
  // must deliver them, not step aside for another collective's polling
  // caller (Transport::BeginBlockingWait).
  std::optional<BlockingWait> blocking;
  if (!options_.wait_poll) blocking.emplace(transport_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    RETURN_IF_ERROR(error_);
  }
  Status status = RunSteps(steps, region, offset, count, dtype, deadline);
  if (!status.ok() && status.code() != StatusCode::kInvalidArgument) {
    // Mid-collective failures leave neighbours out of step: sticky.
    std::lock_guard<std::mutex> lock(mutex_);
    FailLocked(status);
  }
  return status;
}

Status RingCommunicator::RunSteps(const std::vector<Step>& steps,
                                  const MemoryRegion& region, size_t offset,
                                  size_t count, DataType dtype,
                                  Deadline deadline) {
  const size_t element = ElementSize(dtype);
  if (element == 0) {
    return InvalidArgumentError("ring collective: unsupported dtype ", dtype);
  }
  if (offset > region.size() || count > (region.size() - offset) / element) {
    return InvalidArgumentError("ring collective: ", count, " elements at offset ",
                                offset, " exceed the region of ", region.size(),
                                " bytes");
  }
  if (options_.chunk_bytes % element != 0) {
    return InvalidArgumentError("chunk_bytes ", options_.chunk_bytes,
                                " is not a multiple of the element size");
  }
  if (world_ == 1 || steps.empty()) return Status::OK();
  RemoteKey my_key = region.remote_key();
  my_key.address += offset;
  my_key.length = count * element;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    RETURN_IF_ERROR(HealthLocked());
    std::string message(1, static_cast<char>(kDataKey));
    wire::AppendU64(&message, call_);
    message += my_key.Encode();
    RETURN_IF_ERROR(MessageRouter::Send(left_, options_.channel | kReplyBit, message));
    send_region_ = &region;
    send_offset_ = offset;
    size_t begin, end;
    SegmentBounds(count, world_, steps[0].send_segment, &begin, &end);
    StepTrace::FirstSend(options_.tag, call_, rank_);
    QueueSendsLocked(region, offset, begin * element, end * element, steps[0].reduce);
    PumpSendsLocked();
  }
  uint8_t* base = region.data() + offset;
  for (size_t k = 0; k < steps.size(); ++k) {
    StepTrace step_trace(options_.tag, call_, k, rank_, world_, k + 1 < steps.size());
    size_t begin, end;
    SegmentBounds(count, world_, steps[k].receive_segment, &begin, &end);
    for (size_t at = begin * element; at < end * element;) {
      const size_t bytes = std::min(end * element - at, options_.chunk_bytes);
      ASSIGN_OR_RETURN(Ready ready, WaitReady(next_receive_sequence_++, deadline));
      if (ready.byte_offset != at || ready.bytes != bytes ||
          ready.in_scratch != steps[k].reduce) {
        std::lock_guard<std::mutex> lock(mutex_);
        FailLocked(DataLossError("ring: rank ", LeftRank(),
                                 " sent a chunk out of schedule (different count"
                                 " or call order?)"));
        return error_;
      }
      if (steps[k].reduce) {
        Reduce(dtype, base + at,
               scratch_.data() + ready.slot * options_.chunk_bytes, bytes);
        std::string ack(1, static_cast<char>(kAck));
        wire::AppendU32(&ack, 1);
        RETURN_IF_ERROR(MessageRouter::Send(left_, options_.channel | kReplyBit, ack));
      }
      if (k + 1 < steps.size()) {
        std::lock_guard<std::mutex> lock(mutex_);
        QueueSendsLocked(region, offset, at, at + bytes, steps[k + 1].reduce);
        PumpSendsLocked();
      }
      at += bytes;
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  SpinBriefly(transport_, options_.wait_poll, &lock, options_.wait_spin, [&] {
    return (send_queue_.empty() && sends_in_flight_ == 0) || !error_.ok();
  });
  while (!(send_queue_.empty() && sends_in_flight_ == 0)) {
    RETURN_IF_ERROR(HealthLocked());
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("ring collective on rank ", transport_->rank(),
                                   ": rank ", RightRank(),
                                   " did not take its data before the deadline");
    }
    changed_.wait_until(lock, std::min(deadline, Clock::now() + kStatusPoll));
  }
  RETURN_IF_ERROR(error_);
  right_data_keys_.erase(call_);
  ++call_;
  send_region_ = nullptr;
  return Status::OK();
}

Status RingCommunicator::AllReduce(const MemoryRegion& region, size_t offset,
                                   size_t count, DataType dtype,
                                   Deadline deadline) {
  return Run(RingCollective::kAllReduce, region, offset, count, dtype, deadline);
}

Status RingCommunicator::ReduceScatter(const MemoryRegion& region, size_t offset,
                                       size_t count, DataType dtype,
                                       Deadline deadline) {
  return Run(RingCollective::kReduceScatter, region, offset, count, dtype, deadline);
}

Status RingCommunicator::AllGather(const MemoryRegion& region, size_t offset,
                                   size_t count, DataType dtype,
                                   Deadline deadline) {
  return Run(RingCollective::kAllGather, region, offset, count, dtype, deadline);
}

}  // namespace comm
}  // namespace oflite
