#include "oneflow_lite/runtime/commnet/commnet_route.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/runtime/commnet/regst_payload.h"
#include "oneflow_lite/runtime/trace_messages.h"

namespace oflite {

CommNetRoute::CommNetRoute(comm::CommNet* net, std::function<void(const Status&)> on_error,
                           comm::BounceStreamOptions bounce)
    : net_(net),
      on_error_(std::move(on_error)),
      registry_(net),
      bounce_(net, bounce, &registry_, [this](const Status& status) {
        if (on_error_) on_error_(status);
      }) {}

CommNetRoute::~CommNetRoute() { Detach(); }

void CommNetRoute::Attach(LocalMessageBus* bus, const RegstStore* regsts) {
  {
    std::lock_guard<std::mutex> lock(bus_mutex_);
    bus_ = bus;
  }
  regsts_ = regsts;
  // Started here, not in the constructor: a route that replaces another on
  // the same CommNet is built before the old one is destroyed.
  bounce_.Start();
  net_->router()->SetHandler(comm::kActorChannel, [this](int peer, const void* data, size_t size) {
    OnMessage(peer, data, size);
  });
}

void CommNetRoute::Detach() {
  if (bus_ != nullptr) net_->router()->RemoveHandler(comm::kActorChannel);
  {
    // Waits for a delivery in progress on a progress thread (a late READ
    // completion): after this, none reaches the runtime being torn down.
    std::lock_guard<std::mutex> lock(bus_mutex_);
    bus_ = nullptr;
  }
  bounce_.Stop();  // removes the bounce channels' handlers
}

Status CommNetRoute::DeliverToBus(const ActorMessage& message) {
  std::lock_guard<std::mutex> lock(bus_mutex_);
  if (bus_ == nullptr) return Status::OK();  // detached: the run is over
  return bus_->DeliverLocal(message);
}

// ------------------------------------------------------------------ sending

Status CommNetRoute::SendRemote(int64_t machine_id, const ActorMessage& message) {
  TraceMessageSent(message);
  if (message.kind == MessageKind::kProduced && regsts_ != nullptr) {
    StatusOr<Regst*> regst = regsts_->Find(message.regst_desc_id, message.regst_index);
    if (regst.ok() && IsBounceRegst(*(*regst)->desc)) {
      return SendThroughBounce(machine_id, message, **regst);
    }
    if (regst.ok() && !IsStaticZeroCopyRegst(*(*regst)->desc)) {
      // No bytes (a control register): an empty payload for TakePayload.
      const std::string payload = SerializeRegst(**regst);
      return SendFrames(machine_id, message, &payload);
    }
  }
  return SendFrames(machine_id, message, nullptr);
}

Status CommNetRoute::SendWithData(const ActorMessage& message, const Regst& regst) {
  return SendWithBytes(message, SerializeRegst(regst));
}

Status CommNetRoute::SendWithBytes(const ActorMessage& message, const std::string& payload) {
  const int64_t machine = MachineOfTaskId(message.dst_actor_id);
  TraceMessageSent(message);
  if (machine != bus_->machine_id()) return SendFrames(machine, message, &payload);
  staged_.Park(message, payload);
  return bus_->DeliverLocal(message);
}

Status CommNetRoute::Send(int64_t machine_id, comm::Connection* connection,
                          const std::string& frame) {
  return comm::MessageRouter::Send(connection, comm::kActorChannel, frame)
      .WithContext("sending to machine " + std::to_string(machine_id));
}

Status CommNetRoute::SendFrames(int64_t machine_id, const ActorMessage& message,
                                const std::string* payload) {
  ASSIGN_OR_RETURN(comm::Connection * connection,
                   net_->transport()->GetConnection(static_cast<int>(machine_id)));
  if (payload == nullptr) {
    ASSIGN_OR_RETURN(const std::string frame, EncodeMessageFrame(message));
    messages_sent_.fetch_add(1, std::memory_order_relaxed);
    return Send(machine_id, connection, frame);
  }
  const size_t limit = std::min(connection->max_message_size(), kMaxPushedMessageBytes) -
                       comm::MessageRouter::kChannelHeaderSize;
  if (limit <= kDataFrameHeaderBytes) {
    return InternalError("transport messages too small for CommNet frames");
  }
  const size_t chunk = limit - kDataFrameHeaderBytes;
  const std::string_view bytes(*payload);
  size_t offset = 0;
  do {
    const size_t n = std::min(chunk, bytes.size() - offset);
    ASSIGN_OR_RETURN(const std::string frame,
                     EncodeDataFrame(message, bytes.size(), offset, bytes.substr(offset, n)));
    if (offset == 0) messages_sent_.fetch_add(1, std::memory_order_relaxed);
    RETURN_IF_ERROR(Send(machine_id, connection, frame));
    data_frames_sent_.fetch_add(1, std::memory_order_relaxed);
    offset += n;
  } while (offset < bytes.size());
  bytes_sent_.fetch_add(static_cast<int64_t>(bytes.size()), std::memory_order_relaxed);
  // Pushed through the message rings (strategy 1's registered slots): moved
  // once, copied once here by SerializeRegst (the ring-slot copies inside the
  // transport are not counted).
  net_->stats()->pool.bytes_moved += bytes.size();
  net_->stats()->pool.bytes_copied += bytes.size();
  net_->stats()->pool.transfers += 1;
  return Status::OK();
}

Status CommNetRoute::SendThroughBounce(int64_t machine_id, const ActorMessage& message,
                                       const Regst& regst) {
  ASSIGN_OR_RETURN(comm::Connection * connection,
                   net_->transport()->GetConnection(static_cast<int>(machine_id)));
  ASSIGN_OR_RETURN(const std::string frame, bounce_.Enqueue(connection, message, regst));
  messages_sent_.fetch_add(1, std::memory_order_relaxed);
  bounce_payloads_sent_.fetch_add(1, std::memory_order_relaxed);
  return Send(machine_id, connection, frame);
}

// ---------------------------------------------------------------- receiving

void CommNetRoute::OnMessage(int peer_rank, const void* data, size_t size) {
  Status status = HandleFrame(peer_rank, std::string_view(static_cast<const char*>(data), size));
  if (!status.ok() && on_error_) on_error_(status);
}

Status CommNetRoute::HandleFrame(int peer_rank, std::string_view bytes) {
  const std::string from = "frame from rank " + std::to_string(peer_rank);
  StatusOr<CommNetFrame> frame = DecodeCommNetFrame(bytes);
  if (!frame.ok()) return frame.status().WithContext(from);
  switch (frame->type) {
    case CommNetFrameType::kMessage:
      return DeliverToBus(frame->message);
    case CommNetFrameType::kBounce:
      bounce_.Park(peer_rank, frame->message, std::move(frame->bounce));
      return DeliverToBus(frame->message);
    case CommNetFrameType::kData:
      return HandleDataChunk(from, *frame);
  }
  return InternalError(from, ": frame type ", static_cast<int>(frame->type), " not handled");
}

Status CommNetRoute::HandleDataChunk(const std::string& from, const CommNetFrame& frame) {
  const ActorMessage& message = frame.message;
  const size_t n = frame.chunk_bytes.size();
  const ParkingKey key = ParkingKeyOf(message);
  std::optional<std::string> complete;
  {
    std::lock_guard<std::mutex> lock(partial_mutex_);
    std::string& buffer = partial_[key];
    if (frame.chunk_offset != buffer.size() || frame.chunk_offset + n > frame.chunk_total) {
      return DataLossError(from, ": chunk at ", frame.chunk_offset, " of ", frame.chunk_total,
                           " for ", message.ToString(), " (have ", buffer.size(), ")");
    }
    buffer.append(frame.chunk_bytes.data(), n);
    net_->stats()->pool.bytes_copied += n;  // reassembly
    if (buffer.size() < frame.chunk_total) return Status::OK();
    complete = std::move(buffer);
    partial_.erase(key);
  }
  staged_.Park(message, std::move(*complete));
  return DeliverToBus(message);
}

StatusOr<std::string> CommNetRoute::TakePayload(const ActorMessage& message) {
  std::optional<std::string> payload = staged_.Take(message);
  if (!payload.has_value()) return NotFoundError("no data arrived with ", message.ToString());
  return std::move(*payload);
}

// ------------------------------------------------------------------ pulling

Status CommNetRoute::RegisterStaticRegisters(const MachinePlan& plan) {
  if (regsts_ == nullptr) {
    return FailedPreconditionError("CommNet route: registers registered before Attach");
  }
  return registry_.RegisterPlan(plan, *regsts_);
}

Status CommNetRoute::FetchStaticKeys(const MachinePlan& plan, std::chrono::milliseconds timeout) {
  return registry_.FetchPeerKeys(plan, timeout);
}

Status CommNetRoute::StartRead(const ActorMessage& produced, const RegstDescProto& src,
                               Regst* into) {
  const ActorMessage completion = ActorMessage::ReadDone(produced);
  comm::Completion done = [this, completion](const Status& status) {
    OnReadDone(completion, status);
  };
  if (IsBounceRegst(src)) return bounce_.StartPull(produced, src, into, std::move(done));
  return registry_.PostPull(produced, src, *into, std::move(done));
}

void CommNetRoute::OnReadDone(const ActorMessage& completion, const Status& status) {
  reads_done_.Park(completion, status);
  Status delivered = DeliverToBus(completion);
  if (!delivered.ok() && on_error_) on_error_(delivered);
}

Status CommNetRoute::TakeReadStatus(const ActorMessage& completion) {
  std::optional<Status> status = reads_done_.Take(completion);
  if (!status.has_value()) return NotFoundError("no READ completed for ", completion.ToString());
  return *status;
}

}  // namespace oflite
