#include "oneflow_lite/comm/collective/exchange.h"

#include <cstring>
#include <optional>
#include <vector>

#include "oneflow_lite/comm/spin_wait.h"
#include "oneflow_lite/comm/wire.h"
#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/common/trace/trace.h"

namespace oflite {
namespace comm {
namespace {

constexpr std::chrono::milliseconds kStatusPoll{20};
constexpr uint8_t kPiece = 1;
constexpr uint8_t kGatherPiece = 2;

// The call's slice on the calling thread's track (docs/tracing.md), with a
// flow from each sender's call to each receiver's; both ends compute the
// flow id from (tag, call, sender, receiver).
class ExchangeTrace {
 public:
  // Flows to and from each of `peers` (the peers this rank exchanges with).
  ExchangeTrace(uint64_t tag, uint64_t call, int rank, const std::vector<int>& peers) {
    trace::Track* track = trace::CurrentTrack();
    if (track == nullptr || !track->active()) return;
    track_ = track;
    begin_ns_ = trace::NowNs();
    for (int peer : peers) {
      track->AddFlow('s', Id(tag, call, rank, peer), "exchange", begin_ns_);
      track->AddFlow('f', Id(tag, call, peer, rank), "exchange", begin_ns_);
    }
  }
  ~ExchangeTrace() {
    if (track_ != nullptr) {
      track_->AddSlice("collective", "exchange all-reduce", begin_ns_, trace::NowNs(), "");
    }
  }
  ExchangeTrace(const ExchangeTrace&) = delete;
  ExchangeTrace& operator=(const ExchangeTrace&) = delete;

 private:
  static uint64_t Id(uint64_t tag, uint64_t call, int sender, int receiver) {
    return trace::FlowId({static_cast<int64_t>(tag), static_cast<int64_t>(call), sender,
                          receiver, 0x65786368 /* "exch" */});
  }

  trace::Track* track_ = nullptr;
  int64_t begin_ns_ = 0;
};

}  // namespace

ExchangeCommunicator::ExchangeCommunicator(Transport* transport, MessageRouter* router,
                                           const ExchangeOptions& options, RankGroup group)
    : transport_(transport),
      router_(router),
      options_(options),
      group_(std::move(group)),
      rank_(group_.rank()),
      world_(group_.size()) {}

ExchangeCommunicator::~ExchangeCommunicator() { router_->RemoveHandler(options_.channel); }

StatusOr<std::unique_ptr<ExchangeCommunicator>> ExchangeCommunicator::Create(
    Transport* transport, MessageRouter* router, const ExchangeOptions& options) {
  ASSIGN_OR_RETURN(RankGroup group, RankGroup::Make(options.members, transport->rank(),
                                                    transport->world_size(),
                                                    "exchange all-reduce"));
  if (options.schedule == ExchangeSchedule::kDoubling && !IsPowerOfTwo(group.size())) {
    return InvalidArgumentError("exchange all-reduce: recursive doubling needs a power-of-2 "
                                "world, this one has ", group.size(), " ranks");
  }
  std::unique_ptr<ExchangeCommunicator> exchange(
      new ExchangeCommunicator(transport, router, options, std::move(group)));
  exchange->peers_.assign(exchange->world_, nullptr);
  // Starting with the right neighbour, so ranks do not all send to rank 0 first.
  for (int step = 1; step < exchange->world_; ++step) {
    exchange->others_.push_back((exchange->rank_ + step) % exchange->world_);
  }
  for (int peer = 0; peer < exchange->world_; ++peer) {
    if (peer == exchange->rank_) continue;
    const int global = exchange->group_.Global(peer);
    ASSIGN_OR_RETURN(exchange->peers_[peer], transport->GetConnection(global));
    const size_t capacity = exchange->peers_[peer]->max_message_size();
    if (capacity < MessageRouter::kChannelHeaderSize + kExchangePieceHeaderBytes + 8) {
      return InvalidArgumentError("exchange all-reduce: messages to rank ", global, " hold only ",
                                  capacity, " bytes, too few for a piece header and 8 bytes");
    }
  }
  ExchangeCommunicator* self = exchange.get();
  router->SetHandler(options.channel, [self](int peer, const void* data, size_t size) {
    self->OnPiece(peer, data, size);
  });
  return exchange;
}

void ExchangeCommunicator::OnPiece(int sender, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  const int peer = group_.Local(sender);  // its group rank; messages name `sender`
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.ok()) return;
  if (size < kExchangePieceHeaderBytes || (bytes[0] != kPiece && bytes[0] != kGatherPiece) ||
      peer < 0 || peer == rank_) {
    FailLocked(DataLossError("exchange all-reduce: malformed piece from rank ", sender, " (",
                             size, " bytes)", peer < 0 ? ", a rank outside the group" : ""));
    return;
  }
  const bool gather = bytes[0] == kGatherPiece;
  const uint64_t tag = wire::LoadU64(bytes + 1);
  const uint64_t call = wire::LoadU64(bytes + 9);
  const uint64_t total = wire::LoadU64(bytes + 17);
  const uint64_t offset = wire::LoadU64(bytes + 25);
  const size_t length = size - kExchangePieceHeaderBytes;
  if (tag != options_.tag) {
    FailLocked(DataLossError("exchange all-reduce on channel ", options_.channel, ": rank ", sender,
                             " sent tag ", tag, ", rank ", transport_->rank(), " expects ", options_.tag,
                             " (two collectives on one channel?)"));
    return;
  }
  if (total > options_.max_bytes) {
    FailLocked(DataLossError("exchange all-reduce: rank ", sender, " announced ", total,
                             " bytes for call ", call, ", above the limit of ",
                             options_.max_bytes));
    return;
  }
  if (call > (~uint64_t{0} >> 1)) {
    FailLocked(DataLossError("exchange all-reduce: rank ", sender, " sent call number ", call));
    return;
  }
  if (call <= finished_) {
    FailLocked(DataLossError("exchange all-reduce: rank ", sender, " sent a piece of call ", call,
                             " after rank ", transport_->rank(), " finished it"));
    return;
  }
  const uint64_t key = Key(call, gather);
  Incoming& incoming = IncomingLocked(key);
  // The call in progress, after this rank sent its part to `peer`: its
  // pieces go where they belong at once, without staging.
  const bool direct = active_.key == key && (active_.peer == peer || active_.peer < 0);
  if (incoming.sizes[peer] == kUnsized) {
    incoming.sizes[peer] = total;
    if (!direct) incoming.buffers[peer].reset(new uint8_t[std::max<uint64_t>(total, 1)]);
  }
  // A peer's pieces come in order on its connection: each continues the
  // last (what the direct writes below and the staged prefix rely on).
  if (incoming.sizes[peer] != total || offset != incoming.received[peer] ||
      length > total - offset) {
    FailLocked(DataLossError("exchange all-reduce: rank ", sender, "'s piece [", offset, ", +",
                             length, ") of call ", call, " does not continue its ",
                             incoming.received[peer], " of ", incoming.sizes[peer], " bytes"));
    return;
  }
  const uint8_t* payload = bytes + kExchangePieceHeaderBytes;
  if (direct) {
    const bool copy = active_.peer < 0;
    const size_t expected = copy ? SegmentBytes(active_.count, active_.element, world_, peer)
                                 : active_.count * active_.element;
    if (total != expected || length % active_.element != 0) {
      FailLocked(DataLossError("exchange all-reduce: rank ", sender, " sent ", total,
                               " bytes in a piece of ", length, " for call ", call, "; rank ",
                               transport_->rank(), " expects ", expected, " (ranks disagree on the size)"));
      return;
    }
    if (copy) {
      const size_t begin = SegmentBegin(active_.count, active_.element, world_, peer);
      std::memcpy(active_.data + begin + offset, payload, length);
    } else {
      const Status added = AccumulateInto(active_.dtype, payload, active_.data + offset,
                                          static_cast<int64_t>(length / active_.element));
      if (!added.ok()) {
        FailLocked(added);
        return;
      }
    }
  } else if (length > 0) {
    std::memcpy(incoming.buffers[peer].get() + offset, payload, length);
  }
  incoming.received[peer] += length;
  if (incoming.received[peer] == total) changed_.notify_all();
}

size_t ExchangeCommunicator::SegmentBegin(size_t count, size_t element, int world, int index) {
  size_t begin, end;
  RingSegmentBounds(count, world, index, &begin, &end);
  return begin * element;
}

size_t ExchangeCommunicator::SegmentBytes(size_t count, size_t element, int world, int index) {
  size_t begin, end;
  RingSegmentBounds(count, world, index, &begin, &end);
  return (end - begin) * element;
}

ExchangeCommunicator::Incoming& ExchangeCommunicator::IncomingLocked(uint64_t key) {
  Incoming& incoming = incoming_[key];
  if (incoming.buffers.empty()) {
    incoming.buffers.resize(world_);
    incoming.sizes.assign(world_, kUnsized);
    incoming.received.assign(world_, 0);
  }
  return incoming;
}

Status ExchangeCommunicator::SendTo(const std::vector<int>& peers, uint8_t kind,
                                    const uint8_t* data, size_t bytes, uint64_t call) {
  // The router's channel header, then the piece's, for the piece at
  // `offset`.
  uint8_t head[MessageRouter::kChannelHeaderSize + kExchangePieceHeaderBytes];
  MessageRouter::WriteChannelHeader(options_.channel, head);
  head[4] = kind;
  wire::StoreU64(head + 5, options_.tag);
  wire::StoreU64(head + 13, call);
  wire::StoreU64(head + 21, bytes);
  auto head_at = [&head](size_t offset) {
    wire::StoreU64(head + 29, offset);
    return head;
  };
  std::vector<std::string> messages;
  for (int peer : peers) {
    Connection* connection = peers_[peer];
    // Whole elements of every dtype in every piece (a multiple of 8 bytes).
    const size_t piece = (connection->max_message_size() - MessageRouter::kChannelHeaderSize -
                          kExchangePieceHeaderBytes) / 8 * 8;
    Status sent;
    if (bytes <= piece) {
      // One piece: the headers and the caller's bytes go out as two parts,
      // which shm copies straight into the ring slot (no joined copy).
      sent = connection->SendMessageParts(head_at(0), sizeof(head), data, bytes);
    } else {
      // Each peer's pieces go out as one batch (one system call on tcp).
      messages.clear();
      for (size_t offset = 0; offset < bytes; offset += piece) {
        const size_t length = std::min(piece, bytes - offset);
        std::string& message = messages.emplace_back();
        message.reserve(sizeof(head) + length);
        message.append(reinterpret_cast<const char*>(head_at(offset)), sizeof(head));
        message.append(reinterpret_cast<const char*>(data) + offset, length);
      }
      sent = connection->SendMessages(std::move(messages));
    }
    RETURN_IF_ERROR(sent.WithContext("exchange all-reduce: sending to rank " +
                                     std::to_string(group_.Global(peer))));
  }
  return Status::OK();
}

Status ExchangeCommunicator::HealthLocked() const {
  RETURN_IF_ERROR(error_);
  if (options_.cancel != nullptr) RETURN_IF_ERROR(options_.cancel->status());
  for (Connection* peer : peers_) {
    if (peer != nullptr) RETURN_IF_ERROR(peer->status());
  }
  return Status::OK();
}

void ExchangeCommunicator::FailLocked(const Status& status) {
  if (error_.ok()) error_ = status;
  changed_.notify_all();
}

Status ExchangeCommunicator::WaitFor(const std::vector<int>& peers, uint64_t key,
                                     const std::vector<size_t>& bytes, Deadline deadline,
                                     std::unique_lock<std::mutex>* lock) {
  // The peers' pieces usually follow within microseconds: poll for up to
  // wait_spin before sleeping on the condition variable, whose wake-up would
  // cost about as much as the whole exchange. Polling drives the transport
  // from this thread where the provider can and the call is small
  // (poll_max_bytes; Transport::Poll: shm reads its rings and runs OnPiece
  // here, without the progress thread's hop), else yields as SpinWait says, which stops early while the host is
  // oversubscribed (comm/spin_wait.h). Done, the transport's progress
  // thread resumes by itself.
  SpinWait spin(options_.wait_spin);
  bool spinning = true;
  bool polled = false;
  std::optional<BlockingWait> blocking;  // once it sleeps
  while (true) {
    RETURN_IF_ERROR(HealthLocked());
    auto it = incoming_.find(key);
    int missing = -1;
    for (int peer : peers) {
      if (it == incoming_.end() || it->second.sizes[peer] == kUnsized ||
          it->second.received[peer] < std::min(bytes[peer], it->second.sizes[peer])) {
        missing = peer;
        break;
      }
    }
    if (missing < 0) {
      for (int peer : peers) {
        if (it->second.sizes[peer] != bytes[peer]) {
          return DataLossError("exchange all-reduce: rank ", group_.Global(peer), " sent ",
                               it->second.sizes[peer], " bytes for call ", key / 2,
                               ", rank ", transport_->rank(), " expects ", bytes[peer],
                               " (ranks disagree on the size)");
        }
      }
      return Status::OK();
    }
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("exchange all-reduce: rank ", transport_->rank(),
                                   " still waits for rank ", group_.Global(missing), "'s data of call ", key / 2);
    }
    if (spinning) {
      lock->unlock();  // OnPiece takes it, also inside Poll
      polled |= poll_;
      spinning = poll_ && transport_->Poll() ? !spin.Expired() : spin.Idle();
      lock->lock();
      continue;
    }
    if (polled) {  // about to sleep: the progress thread takes over now
      polled = false;
      transport_->EndPolling();
    }
    // Asleep, this thread no longer drives the transport: its progress
    // thread must not step aside for another thread's Polls meanwhile.
    if (!blocking) blocking.emplace(transport_);
    changed_.wait_until(*lock, std::min(deadline, Clock::now() + kStatusPoll));
  }
}

Status ExchangeCommunicator::AllReduce(void* data, size_t count, DataType dtype,
                                       Deadline deadline) {
  if (!CanAccumulate(dtype)) {
    return InvalidArgumentError("exchange all-reduce: cannot sum ", DataType_Name(dtype));
  }
  if (world_ == 1 || count == 0) return Status::OK();
  uint64_t call;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    RETURN_IF_ERROR(HealthLocked());
    call = ++call_;
  }
  auto* bytes = static_cast<uint8_t*>(data);
  // Larger calls wait without polling: the progress thread delivers.
  poll_ = count * static_cast<size_t>(SizeOf(dtype)) <= options_.poll_max_bytes;
  std::optional<BlockingWait> blocking;
  if (!poll_) blocking.emplace(transport_);
  Status status;
  switch (Effective(world_, options_.schedule)) {
    case ExchangeSchedule::kDirect:
      status = DirectAllReduce(bytes, count, dtype, call, deadline);
      break;
    case ExchangeSchedule::kDoubling:
      status = PairwiseAllReduce(bytes, count, dtype, call, deadline);
      break;
    case ExchangeSchedule::kScatterGather:
      status = ScatterGatherAllReduce(bytes, count, dtype, call, deadline);
      break;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  active_ = Active();
  if (!status.ok()) {
    FailLocked(status);
    return status;
  }
  incoming_.erase(Key(call, false));
  incoming_.erase(Key(call, true));
  finished_ = call;
  return Status::OK();
}

size_t ExchangeCommunicator::BytesSent(size_t count, size_t element_bytes, int rank, int world,
                                       ExchangeSchedule schedule) {
  const size_t bytes = count * element_bytes;
  if (world < 2 || count == 0) return 0;
  switch (Effective(world, schedule)) {
    case ExchangeSchedule::kDirect:
      return static_cast<size_t>(world - 1) * bytes;
    case ExchangeSchedule::kDoubling: {
      size_t rounds = 0;
      for (int span = 1; span < world; span <<= 1) ++rounds;
      return rounds * bytes;
    }
    case ExchangeSchedule::kScatterGather: {
      const size_t own = SegmentBytes(count, element_bytes, world, rank);
      return (bytes - own) + static_cast<size_t>(world - 1) * own;
    }
  }
  return 0;
}

Status ExchangeCommunicator::SumInRankOrder(uint8_t* mine, size_t count, DataType dtype,
                                            Incoming* incoming) const {
  // ((b0 + b1) + b2) + ... on every rank, so every rank holds the same bits.
  // Ranks 0 and 1 sum in place: b1 + b0 is b0 + b1 bit for bit (one
  // addition commutes; only the grouping of several matters). Others sum in
  // rank 0's staged buffer and copy the result out.
  uint8_t* sum = rank_ <= 1 ? mine : incoming->buffers[0].get();
  if (rank_ == 1) {
    RETURN_IF_ERROR(AccumulateInto(dtype, incoming->buffers[0].get(), sum,
                                   static_cast<int64_t>(count)));
  }
  for (int peer = rank_ == 1 ? 2 : 1; peer < world_; ++peer) {
    const void* part = peer == rank_ ? mine : incoming->buffers[peer].get();
    RETURN_IF_ERROR(AccumulateInto(dtype, part, sum, static_cast<int64_t>(count)));
  }
  if (rank_ > 1) std::memcpy(mine, sum, count * static_cast<size_t>(SizeOf(dtype)));
  return Status::OK();
}

Status ExchangeCommunicator::DirectAllReduce(uint8_t* data, size_t count, DataType dtype,
                                             uint64_t call, Deadline deadline) {
  const size_t bytes = count * static_cast<size_t>(SizeOf(dtype));
  const std::vector<int>& peers = others_;
  ExchangeTrace trace(options_.tag, call, rank_, peers);
  RETURN_IF_ERROR(SendTo(peers, kPiece, data, bytes, call));
  Incoming incoming;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    RETURN_IF_ERROR(WaitFor(peers, Key(call, false), std::vector<size_t>(world_, bytes), deadline,
                            &lock));
    incoming = std::move(incoming_[Key(call, false)]);
  }
  return SumInRankOrder(data, count, dtype, &incoming);
}

Status ExchangeCommunicator::PairwiseAllReduce(uint8_t* data, size_t count, DataType dtype,
                                               uint64_t call, Deadline deadline) {
  const size_t element = static_cast<size_t>(SizeOf(dtype));
  const size_t bytes = count * element;
  const uint64_t key = Key(call, false);
  std::vector<int> partners;
  for (int bit = 1; bit < world_; bit <<= 1) partners.push_back(rank_ ^ bit);
  ExchangeTrace trace(options_.tag, call, rank_, partners);
  const std::vector<size_t> expected(world_, bytes);
  for (int partner : partners) {
    // What this rank holds now (its part, then the sum of its group) goes
    // out first: the messages copy it, so the adds below may change it.
    RETURN_IF_ERROR(SendTo({partner}, kPiece, data, bytes, call));
    std::unique_lock<std::mutex> lock(mutex_);
    RETURN_IF_ERROR(HealthLocked());
    Incoming& incoming = IncomingLocked(key);
    // The partner's pieces that came before this round began were staged:
    // add that prefix; OnPiece adds the rest as it arrives.
    const size_t staged = incoming.received[partner];
    if (staged > 0) {
      if (incoming.sizes[partner] != bytes || staged % element != 0) {
        return DataLossError("exchange all-reduce: rank ", group_.Global(partner), " sent ",
                             incoming.sizes[partner], " bytes for call ", call, ", rank ",
                             transport_->rank(),
                             " reduces ", bytes, " (ranks disagree on the size)");
      }
      RETURN_IF_ERROR(AccumulateInto(dtype, incoming.buffers[partner].get(), data,
                                     static_cast<int64_t>(staged / element)));
      incoming.buffers[partner].reset();
    }
    active_ = Active{key, partner, data, count, dtype, element};
    RETURN_IF_ERROR(WaitFor({partner}, key, expected, deadline, &lock));
    active_ = Active();
  }
  return Status::OK();
}

Status ExchangeCommunicator::ScatterGatherAllReduce(uint8_t* data, size_t count, DataType dtype,
                                                    uint64_t call, Deadline deadline) {
  const size_t element = static_cast<size_t>(SizeOf(dtype));
  const std::vector<int>& peers = others_;
  ExchangeTrace trace(options_.tag, call, rank_, peers);
  std::vector<size_t> segment(world_);  // bytes, by rank
  for (int r = 0; r < world_; ++r) segment[r] = SegmentBytes(count, element, world_, r);
  uint8_t* mine = data + SegmentBegin(count, element, world_, rank_);
  const uint64_t scatter_key = Key(call, false);
  const uint64_t gather_key = Key(call, true);
  {
    // A peer's sum of its segment, the all-gather, is copied into place as
    // it arrives: a peer sends it only after this rank's part of that
    // segment reached it, and this rank reads that segment only to send it.
    std::lock_guard<std::mutex> lock(mutex_);
    RETURN_IF_ERROR(HealthLocked());
    Incoming& early = IncomingLocked(gather_key);
    for (int peer : peers) {  // none from a peer that keeps to the protocol
      const size_t staged = early.received[peer];
      if (staged == 0) continue;
      if (early.sizes[peer] != segment[peer]) {
        return DataLossError("exchange all-reduce: rank ", group_.Global(peer), " sent ",
                             early.sizes[peer], " bytes for its segment of call ", call, ", rank ",
                             transport_->rank(),
                             " expects ", segment[peer], " (ranks disagree on the size)");
      }
      std::memcpy(data + SegmentBegin(count, element, world_, peer), early.buffers[peer].get(),
                  staged);
      early.buffers[peer].reset();
    }
    active_ = Active{gather_key, -1, data, count, dtype, element};
  }
  // Reduce-scatter: segment j to rank j, then this rank's segment summed.
  for (int peer : peers) {
    RETURN_IF_ERROR(SendTo({peer}, kPiece, data + SegmentBegin(count, element, world_, peer),
                           segment[peer], call));
  }
  Incoming incoming;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    RETURN_IF_ERROR(WaitFor(peers, scatter_key, std::vector<size_t>(world_, segment[rank_]),
                            deadline, &lock));
    incoming = std::move(incoming_[scatter_key]);
  }
  if (segment[rank_] > 0) {
    RETURN_IF_ERROR(SumInRankOrder(mine, segment[rank_] / element, dtype, &incoming));
  }
  // All-gather: this rank's sum to every peer; theirs land in place.
  RETURN_IF_ERROR(SendTo(peers, kGatherPiece, mine, segment[rank_], call));
  std::unique_lock<std::mutex> lock(mutex_);
  return WaitFor(peers, gather_key, segment, deadline, &lock);
}

}  // namespace comm
}  // namespace oflite
