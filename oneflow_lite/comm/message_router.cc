#include "oneflow_lite/comm/message_router.h"

#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {

void MessageRouter::SetHandler(uint32_t channel, MessageHandler handler) {
  std::lock_guard<std::mutex> lock(mutex_);
  handlers_[channel] = std::move(handler);
  auto parked = parked_.find(channel);
  if (parked == parked_.end()) return;
  for (const auto& [peer, bytes] : parked->second) {
    handlers_[channel](peer, bytes.data(), bytes.size());
  }
  parked_count_ -= parked->second.size();
  parked_.erase(parked);
}

void MessageRouter::RemoveHandler(uint32_t channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  handlers_.erase(channel);
}

MessageHandler MessageRouter::AsHandler() {
  return [this](int peer, const void* data, size_t size) {
    Dispatch(peer, data, size);
  };
}

void MessageRouter::Dispatch(int peer_rank, const void* data, size_t size) {
  if (size < kChannelHeaderSize) {
    ++dropped_;
    return;
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  const uint32_t channel = wire::LoadU32(bytes);
  const uint8_t* payload = bytes + kChannelHeaderSize;
  const size_t payload_size = size - kChannelHeaderSize;
  // Handlers run under the lock: one at a time, and in order with parked
  // messages delivered by SetHandler.
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = handlers_.find(channel);
  if (it != handlers_.end()) {
    it->second(peer_rank, payload, payload_size);
    return;
  }
  if (parked_count_ >= kMaxParked) {
    ++dropped_;
    return;
  }
  parked_[channel].emplace_back(
      peer_rank, std::string(reinterpret_cast<const char*>(payload), payload_size));
  ++parked_count_;
}

Status MessageRouter::Send(Connection* connection, uint32_t channel,
                           const std::string& payload) {
  std::string message = StartMessage(channel, payload.size());
  message += payload;
  return connection->SendMessage(message.data(), message.size());
}

std::string MessageRouter::StartMessage(uint32_t channel, size_t payload_bytes) {
  uint8_t header[kChannelHeaderSize];
  WriteChannelHeader(channel, header);
  std::string message;
  message.reserve(kChannelHeaderSize + payload_bytes);
  message.append(reinterpret_cast<const char*>(header), kChannelHeaderSize);
  return message;
}

void MessageRouter::WriteChannelHeader(uint32_t channel, uint8_t* out) {
  wire::StoreU32(out, channel);
}

}  // namespace comm
}  // namespace oflite
