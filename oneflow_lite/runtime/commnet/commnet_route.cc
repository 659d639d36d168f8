#include "oneflow_lite/runtime/commnet/commnet_route.h"

#include <algorithm>
#include <cstring>

#include "glog/logging.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/little_endian.h"
#include "oneflow_lite/runtime/trace_messages.h"

namespace oflite {
namespace {

constexpr uint8_t kFrameMessage = 1;
constexpr uint8_t kFrameData = 2;
constexpr uint8_t kFrameBounce = 3;
constexpr size_t kFrameHeader = 2 + kActorMessageWireBytes;
constexpr size_t kDataHeader = kFrameHeader + 16;
constexpr uint64_t kMaxBlobRank = 16;

uint64_t GetU64(const char* data) {
  return little_endian::LoadU64(reinterpret_cast<const uint8_t*>(data));
}

uint32_t GetU32(const char* data) {
  return little_endian::LoadU32(reinterpret_cast<const uint8_t*>(data));
}

// The bounce stream of a (register desc, consumer task) pair.
comm::BounceStreamId StreamOf(const ActorMessage& message) {
  return {static_cast<uint64_t>(message.regst_desc_id), static_cast<uint64_t>(message.dst_actor_id)};
}

}  // namespace

std::string SerializeRegst(const Regst& regst) {
  std::string out;
  for (const Blob& blob : regst.blobs) {
    little_endian::AppendU64(&out, static_cast<uint64_t>(blob.shape().rank()));
    for (int64_t d : blob.shape().dims()) little_endian::AppendU64(&out, static_cast<uint64_t>(d));
    const int64_t bytes = blob.ByteSize();
    little_endian::AppendU64(&out, static_cast<uint64_t>(bytes));
    out.append(static_cast<const char*>(blob.raw()), bytes);
  }
  return out;
}

StatusOr<std::vector<PayloadBlob>> ParsePayload(const std::string& payload) {
  std::vector<PayloadBlob> blobs;
  size_t at = 0;
  auto need = [&](size_t n) { return at + n <= payload.size(); };
  while (at < payload.size()) {
    if (!need(8)) return DataLossError("register payload: truncated blob header at byte ", at);
    const uint64_t ndim = GetU64(payload.data() + at);
    at += 8;
    if (ndim > 16 || !need(8 * ndim + 8)) return DataLossError("register payload: bad rank ", ndim);
    std::vector<int64_t> dims(ndim);
    for (uint64_t i = 0; i < ndim; ++i, at += 8) dims[i] = static_cast<int64_t>(GetU64(payload.data() + at));
    const uint64_t bytes = GetU64(payload.data() + at);
    at += 8;
    if (!need(bytes)) return DataLossError("register payload: blob of ", bytes, " bytes truncated");
    blobs.push_back(PayloadBlob{Shape(std::move(dims)), payload.substr(at, bytes)});
    at += bytes;
  }
  return blobs;
}

Status DeserializeRegst(const std::string& payload, Regst* regst) {
  ASSIGN_OR_RETURN(std::vector<PayloadBlob> blobs, ParsePayload(payload));
  if (blobs.size() != regst->blobs.size()) {
    return DataLossError("register ", regst->desc->regst_desc_id(), ": payload has ", blobs.size(),
                         " blobs, the register ", regst->blobs.size());
  }
  for (size_t i = 0; i < blobs.size(); ++i) {
    Blob& blob = regst->blobs[i];
    const int64_t capacity = regst->desc->blob(static_cast<int>(i)).bytes();
    const int64_t bytes = blobs[i].shape.elem_count() * SizeOf(blob.dtype());
    if (bytes != static_cast<int64_t>(blobs[i].bytes.size()) || bytes > capacity) {
      return DataLossError("register ", regst->desc->regst_desc_id(), " blob ", i, ": ",
                           blobs[i].bytes.size(), " bytes for shape ", blobs[i].shape.ToString(),
                           " (capacity ", capacity, ")");
    }
    blob.set_shape(blobs[i].shape);
    if (bytes > 0) std::memcpy(blob.raw(), blobs[i].bytes.data(), bytes);
  }
  return Status::OK();
}

CommNetRoute::CommNetRoute(comm::CommNet* net, std::function<void(const Status&)> on_error,
                           comm::BounceStreamOptions bounce)
    : net_(net),
      zero_copy_registers_(net->transport(), &net->stats()->zero_copy),
      bounce_destinations_(net->transport(), &net->stats()->bounce),
      on_error_(std::move(on_error)),
      bounce_options_(bounce) {
  bounce_options_.channel = kBounceChannel;
}

CommNetRoute::~CommNetRoute() { Detach(); }

void CommNetRoute::Detach() {
  if (bus_ != nullptr) net_->router()->RemoveHandler(comm::kActorChannel);
  {
    // Waits for a delivery in progress on a progress thread (a late READ
    // completion): after this, none reaches the runtime being torn down.
    std::lock_guard<std::mutex> lock(bus_mutex_);
    bus_ = nullptr;
  }
  bounce_.reset();  // removes the bounce channels' handlers
}

Status CommNetRoute::DeliverToBus(const ActorMessage& message) {
  std::lock_guard<std::mutex> lock(bus_mutex_);
  if (bus_ == nullptr) return Status::OK();  // detached: the run is over
  return bus_->DeliverLocal(message);
}

void CommNetRoute::Attach(LocalMessageBus* bus, const RegstStore* regsts) {
  {
    std::lock_guard<std::mutex> lock(bus_mutex_);
    bus_ = bus;
  }
  regsts_ = regsts;
  // Created here, not in the constructor: a route that replaces another on
  // the same CommNet is built before the old one is destroyed.
  StatusOr<std::unique_ptr<comm::BounceStreams>> streams = comm::BounceStreams::Create(
      net_->transport(), net_->router(), bounce_options_, &net_->stats()->bounce,
      [this](const Status& status) {
        if (on_error_) on_error_(status);
      });
  if (streams.ok()) {
    bounce_ = std::move(*streams);
    bounce_status_ = Status::OK();
  } else {
    bounce_status_ = streams.status().WithContext("bounce buffers of the CommNet route");
  }
  net_->router()->SetHandler(comm::kActorChannel,
                             [this](int peer, const void* data, size_t size) {
                               OnMessage(peer, data, size);
                             });
}

Status CommNetRoute::SendRemote(int64_t machine_id, const ActorMessage& message) {
  TraceMessageSent(message);
  if (message.kind == MessageKind::kProduced && regsts_ != nullptr) {
    StatusOr<Regst*> regst = regsts_->Find(message.regst_desc_id, message.regst_index);
    if (regst.ok() && IsBounce(*(*regst)->desc)) {
      return SendThroughBounce(machine_id, message, **regst);
    }
    if (regst.ok() && !IsStaticZeroCopy(*(*regst)->desc)) {
      // No bytes (a control register): an empty payload for TakePayload.
      const std::string payload = SerializeRegst(**regst);
      return SendFrames(machine_id, message, &payload);
    }
  }
  return SendFrames(machine_id, message, nullptr);
}

Status CommNetRoute::SendWithData(const ActorMessage& message, const Regst& regst) {
  const std::string payload = SerializeRegst(regst);
  const int64_t machine = MachineOfTaskId(message.dst_actor_id);
  TraceMessageSent(message);
  if (machine != bus_->machine_id()) return SendFrames(machine, message, &payload);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    staged_[KeyOf(message)] = payload;
  }
  return bus_->DeliverLocal(message);
}

int64_t CommNetRoute::RegstBytes(const RegstDescProto& desc) {
  int64_t end = 0;
  for (const BlobInRegst& blob : desc.blob()) end = std::max(end, blob.offset() + blob.bytes());
  return end;
}

bool CommNetRoute::IsStaticZeroCopy(const RegstDescProto& src) {
  return src.cross_machine_strategy() == CM_STATIC_ZERO_COPY && RegstBytes(src) > 0;
}

bool CommNetRoute::IsBounce(const RegstDescProto& src) {
  return src.cross_machine_strategy() != CM_STATIC_ZERO_COPY && RegstBytes(src) > 0;
}

bool CommNetRoute::IsPulledByRead(const RegstDescProto& src) { return RegstBytes(src) > 0; }

std::string CommNetRoute::StaticKeyName(int64_t desc, int32_t index) const {
  return key_prefix_ + "oflite/zc/" + std::to_string(desc) + "/" + std::to_string(index);
}

Status CommNetRoute::RegisterStaticRegisters(const MachinePlan& plan) {
  for (const TaskProto& task : plan.task()) {
    for (const RegstDescProto& desc : task.produced()) {
      if (!IsStaticZeroCopy(desc)) continue;
      bool remote = false;
      for (int64_t consumer : desc.consumer_task_id()) {
        remote = remote || MachineOfTaskId(consumer) != plan.machine_id();
      }
      if (remote) RETURN_IF_ERROR(RegisterSources(desc));
    }
    // The commnet task's own registers: READ destinations of either strategy.
    const RegstDescProto& src = task.commnet().src_regst();
    if (task.type() == TASK_COMMNET && IsPulledByRead(src)) {
      comm::StaticRegisterSet* set =
          IsStaticZeroCopy(src) ? &zero_copy_registers_ : &bounce_destinations_;
      for (const RegstDescProto& desc : task.produced()) {
        if (desc.blob_size() > 0) RETURN_IF_ERROR(RegisterDestinations(desc, set));
      }
    }
  }
  return Status::OK();
}

Status CommNetRoute::RegisterSources(const RegstDescProto& desc) {
  for (int32_t i = 0; i < desc.regst_num(); ++i) {
    ASSIGN_OR_RETURN(Regst * regst, regsts_->Find(desc.regst_desc_id(), i));
    ASSIGN_OR_RETURN(comm::RemoteKey key,
                     zero_copy_registers_.RegisterSource({desc.regst_desc_id(), i}, regst->base,
                                                         RegstBytes(desc)));
    RETURN_IF_ERROR(net_->control()->Put(StaticKeyName(desc.regst_desc_id(), i), key.Encode()));
  }
  return Status::OK();
}

Status CommNetRoute::RegisterDestinations(const RegstDescProto& desc,
                                          comm::StaticRegisterSet* set) {
  for (int32_t i = 0; i < desc.regst_num(); ++i) {
    ASSIGN_OR_RETURN(Regst * regst, regsts_->Find(desc.regst_desc_id(), i));
    RETURN_IF_ERROR(
        set->RegisterDestination({desc.regst_desc_id(), i}, regst->base, RegstBytes(desc)));
  }
  return Status::OK();
}

Status CommNetRoute::FetchStaticKeys(const MachinePlan& plan, std::chrono::milliseconds timeout) {
  for (const TaskProto& task : plan.task()) {
    if (task.type() != TASK_COMMNET || !IsStaticZeroCopy(task.commnet().src_regst())) continue;
    const RegstDescProto& src = task.commnet().src_regst();
    for (int32_t i = 0; i < src.regst_num(); ++i) {
      ASSIGN_OR_RETURN(std::string bytes,
                       net_->control()->Get(StaticKeyName(src.regst_desc_id(), i), timeout,
                                            static_cast<int>(task.commnet().src_machine_id())));
      ASSIGN_OR_RETURN(comm::RemoteKey key, comm::RemoteKey::Decode(bytes));
      zero_copy_registers_.AddRemoteSource({src.regst_desc_id(), i}, key);
    }
  }
  return Status::OK();
}

Status CommNetRoute::StartRead(const ActorMessage& produced, const RegstDescProto& src,
                               Regst* into) {
  if (IsBounce(src)) return StartBounceRead(produced, src, into);
  const std::string what = "READ of register " + std::to_string(src.regst_desc_id()) + "[" +
                           std::to_string(produced.regst_index) + "]";
  const int64_t bytes = RegstBytes(src);
  if (RegstBytes(*into->desc) != bytes) {
    return InvalidArgumentError(what, ": ", bytes, " bytes into a register of ",
                                RegstBytes(*into->desc));
  }
  ASSIGN_OR_RETURN(comm::Connection * connection,
                   net_->transport()->GetConnection(
                       static_cast<int>(MachineOfTaskId(produced.src_actor_id))));
  const ActorMessage completion = ActorMessage::ReadDone(produced);
  return zero_copy_registers_
      .PostPull(connection, {src.regst_desc_id(), produced.regst_index},
                {into->desc->regst_desc_id(), into->index}, static_cast<size_t>(bytes),
                [this, completion](const Status& status) { OnReadDone(completion, status); })
      .WithContext(what);
}

void CommNetRoute::OnReadDone(const ActorMessage& completion, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reads_done_[KeyOf(completion)] = status;
  }
  Status delivered = DeliverToBus(completion);
  if (!delivered.ok() && on_error_) on_error_(delivered);
}

Status CommNetRoute::SendThroughBounce(int64_t machine_id, const ActorMessage& message,
                                       const Regst& regst) {
  RETURN_IF_ERROR(bounce_status_);
  if (bounce_ == nullptr) return FailedPreconditionError("CommNet route not attached");
  std::vector<comm::ConstSegment> segments;
  uint64_t total = 0, capacity = 0;
  std::string frame;
  frame.push_back(static_cast<char>(kCommNetWireVersion));
  frame.push_back(static_cast<char>(kFrameBounce));
  ASSIGN_OR_RETURN(const std::string encoded, EncodeActorMessage(message));
  frame += encoded;
  std::string shapes;
  little_endian::AppendU32(&shapes, static_cast<uint32_t>(regst.blobs.size()));
  for (size_t i = 0; i < regst.blobs.size(); ++i) {
    const Blob& blob = regst.blobs[i];
    const uint64_t bytes = static_cast<uint64_t>(blob.ByteSize());
    segments.push_back({blob.raw(), bytes});
    total += bytes;
    capacity += static_cast<uint64_t>(regst.desc->blob(static_cast<int>(i)).bytes());
    little_endian::AppendU32(&shapes, static_cast<uint32_t>(blob.shape().rank()));
    for (int64_t d : blob.shape().dims()) little_endian::AppendU64(&shapes, static_cast<uint64_t>(d));
  }
  ASSIGN_OR_RETURN(comm::Connection * connection,
                   net_->transport()->GetConnection(static_cast<int>(machine_id)));
  if (frame.size() + 16 + shapes.size() + comm::MessageRouter::kChannelHeaderSize >
      connection->max_message_size()) {
    return InvalidArgumentError("register ", message.regst_desc_id, ": the shapes of its ",
                                regst.blobs.size(), " blobs do not fit one transport message");
  }
  ASSIGN_OR_RETURN(uint64_t number,
                   bounce_->Enqueue(static_cast<int>(machine_id), StreamOf(message),
                                    std::move(segments), capacity));
  little_endian::AppendU64(&frame, number);
  little_endian::AppendU64(&frame, total);
  frame += shapes;
  messages_sent_.fetch_add(1, std::memory_order_relaxed);
  bounce_payloads_sent_.fetch_add(1, std::memory_order_relaxed);
  return comm::MessageRouter::Send(connection, comm::kActorChannel, frame)
      .WithContext("sending to machine " + std::to_string(machine_id));
}

Status CommNetRoute::HandleBounceFrame(int peer_rank, const ActorMessage& message,
                                       const std::string& frame) {
  const std::string from = "bounce frame from rank " + std::to_string(peer_rank);
  size_t at = kFrameHeader;
  if (frame.size() < at + 20) return DataLossError(from, ": ", frame.size(), " bytes");
  BounceHeader header;
  header.peer_rank = peer_rank;
  header.payload = GetU64(frame.data() + at);
  header.total = GetU64(frame.data() + at + 8);
  const uint32_t blobs = GetU32(frame.data() + at + 16);
  at += 20;
  for (uint32_t b = 0; b < blobs; ++b) {
    if (frame.size() < at + 4) return DataLossError(from, ": truncated shape of blob ", b);
    const uint32_t rank = GetU32(frame.data() + at);
    at += 4;
    if (rank > kMaxBlobRank || frame.size() < at + 8 * rank) {
      return DataLossError(from, ": blob ", b, " of rank ", rank);
    }
    std::vector<int64_t> dims(rank);
    for (uint32_t d = 0; d < rank; ++d, at += 8) {
      dims[d] = static_cast<int64_t>(GetU64(frame.data() + at));
      if (dims[d] < 0) return DataLossError(from, ": blob ", b, " has a negative dimension");
    }
    header.shapes.emplace_back(std::move(dims));
  }
  if (at != frame.size()) return DataLossError(from, ": ", frame.size() - at, " stray bytes");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    bounce_headers_[KeyOf(message)] = std::move(header);
  }
  return DeliverToBus(message);
}

Status CommNetRoute::StartBounceRead(const ActorMessage& produced, const RegstDescProto& src,
                                     Regst* into) {
  RETURN_IF_ERROR(bounce_status_);
  if (bounce_ == nullptr) return FailedPreconditionError("CommNet route not attached");
  const std::string what = "bounce pull of register " + std::to_string(src.regst_desc_id()) +
                           "[" + std::to_string(produced.regst_index) + "] piece " +
                           std::to_string(produced.piece_id);
  BounceHeader header;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = bounce_headers_.find(KeyOf(produced));
    if (found == bounce_headers_.end()) {
      return FailedPreconditionError(what, ": no bounce frame arrived for ", produced.ToString());
    }
    header = std::move(found->second);
    bounce_headers_.erase(found);
  }
  StatusOr<const comm::MemoryRegion*> local =
      bounce_destinations_.Find({into->desc->regst_desc_id(), into->index});
  if (!local.ok()) return FailedPreconditionError(what, ": destination ", local.status().message());
  if (header.shapes.size() != into->blobs.size()) {
    return DataLossError(what, ": ", header.shapes.size(), " blobs into a register of ",
                         into->blobs.size());
  }
  std::vector<comm::RegionSegment> segments;
  uint64_t total = 0;
  for (size_t i = 0; i < into->blobs.size(); ++i) {
    Blob& blob = into->blobs[i];
    const int64_t bytes = header.shapes[i].elem_count() * SizeOf(blob.dtype());
    const int64_t capacity = into->desc->blob(static_cast<int>(i)).bytes();
    if (bytes > capacity) {
      return DataLossError(what, ": blob ", i, " of shape ", header.shapes[i].ToString(), " (",
                           bytes, " bytes) exceeds its capacity of ", capacity);
    }
    blob.set_shape(header.shapes[i]);
    const size_t offset = static_cast<size_t>(static_cast<char*>(blob.raw()) - into->base);
    segments.push_back({offset, static_cast<size_t>(bytes)});
    total += static_cast<uint64_t>(bytes);
  }
  if (total != header.total) {
    return DataLossError(what, ": shapes of ", total, " bytes, the producer sent ", header.total);
  }
  const ActorMessage completion = ActorMessage::ReadDone(produced);
  return bounce_
      ->Pull(header.peer_rank, StreamOf(produced), header.payload, header.total,
             *local, std::move(segments),
             [this, completion](const Status& status) { OnReadDone(completion, status); })
      .WithContext(what);
}

Status CommNetRoute::TakeReadStatus(const ActorMessage& completion) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = reads_done_.find(KeyOf(completion));
  if (it == reads_done_.end()) return NotFoundError("no READ completed for ", completion.ToString());
  Status status = it->second;
  reads_done_.erase(it);
  return status;
}

StatusOr<std::string> CommNetRoute::TakePayload(const ActorMessage& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = staged_.find(KeyOf(message));
  if (it == staged_.end()) return NotFoundError("no data arrived with ", message.ToString());
  std::string payload = std::move(it->second);
  staged_.erase(it);
  return payload;
}

Status CommNetRoute::SendFrames(int64_t machine_id, const ActorMessage& message,
                                const std::string* payload) {
  ASSIGN_OR_RETURN(comm::Connection * connection,
                   net_->transport()->GetConnection(static_cast<int>(machine_id)));
  std::string head;
  head.push_back(static_cast<char>(kCommNetWireVersion));
  head.push_back(static_cast<char>(payload == nullptr ? kFrameMessage : kFrameData));
  ASSIGN_OR_RETURN(const std::string encoded, EncodeActorMessage(message));
  head += encoded;
  messages_sent_.fetch_add(1, std::memory_order_relaxed);
  if (payload == nullptr) {
    return comm::MessageRouter::Send(connection, comm::kActorChannel, head)
        .WithContext("sending to machine " + std::to_string(machine_id));
  }
  const size_t limit = connection->max_message_size() - comm::MessageRouter::kChannelHeaderSize;
  if (limit <= kDataHeader) return InternalError("transport messages too small for CommNet frames");
  const size_t chunk = limit - kDataHeader;
  size_t offset = 0;
  do {
    const size_t n = std::min(chunk, payload->size() - offset);
    std::string frame = head;
    little_endian::AppendU64(&frame, payload->size());
    little_endian::AppendU64(&frame, offset);
    frame.append(*payload, offset, n);
    RETURN_IF_ERROR(comm::MessageRouter::Send(connection, comm::kActorChannel, frame)
                        .WithContext("sending to machine " + std::to_string(machine_id)));
    offset += n;
  } while (offset < payload->size());
  bytes_sent_.fetch_add(static_cast<int64_t>(payload->size()), std::memory_order_relaxed);
  // Pushed through the message rings (strategy 1's registered slots): moved
  // once, copied once here by SerializeRegst (the ring-slot copies inside the
  // transport are not counted).
  net_->stats()->pool.bytes_moved += payload->size();
  net_->stats()->pool.bytes_copied += payload->size();
  net_->stats()->pool.transfers += 1;
  return Status::OK();
}

void CommNetRoute::OnMessage(int peer_rank, const void* data, size_t size) {
  Status status = HandleFrame(peer_rank, std::string(static_cast<const char*>(data), size));
  if (!status.ok() && on_error_) on_error_(status);
}

Status CommNetRoute::HandleFrame(int peer_rank, const std::string& frame) {
  const std::string from = "frame from rank " + std::to_string(peer_rank);
  if (frame.size() < kFrameHeader) return DataLossError(from, ": ", frame.size(), " bytes");
  if (static_cast<uint8_t>(frame[0]) != kCommNetWireVersion) {
    return DataLossError(from, ": wire version ", static_cast<int>(static_cast<uint8_t>(frame[0])),
                         ", this build speaks ", static_cast<int>(kCommNetWireVersion));
  }
  ASSIGN_OR_RETURN(ActorMessage message,
                   DecodeActorMessage(frame.substr(2, kActorMessageWireBytes)));
  const uint8_t type = static_cast<uint8_t>(frame[1]);
  if (type == kFrameMessage) return DeliverToBus(message);
  if (type == kFrameBounce) return HandleBounceFrame(peer_rank, message, frame);
  if (type != kFrameData || frame.size() < kDataHeader) {
    return DataLossError(from, ": bad frame type ", static_cast<int>(type));
  }
  const uint64_t total = GetU64(frame.data() + kFrameHeader);
  const uint64_t offset = GetU64(frame.data() + kFrameHeader + 8);
  const size_t n = frame.size() - kDataHeader;
  const Key key = KeyOf(message);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string& buffer = partial_[key];
    if (offset != buffer.size() || offset + n > total) {
      return DataLossError(from, ": chunk at ", offset, " of ", total, " for ", message.ToString(),
                           " (have ", buffer.size(), ")");
    }
    buffer.append(frame, kDataHeader, n);
    net_->stats()->pool.bytes_copied += n;  // reassembly
    if (buffer.size() < total) return Status::OK();
    staged_[key] = std::move(buffer);
    partial_.erase(key);
  }
  return DeliverToBus(message);
}

}  // namespace oflite
