// Multiplexes one Transport's message stream among independent users
// (bounce channels, collectives, the runtime's actor messages). Every
// message starts with a little-endian u32 channel id; the router strips it
// and calls the handler registered for that channel. Messages for a channel
// without a handler yet are kept (up to kMaxParked in all) and delivered, in
// order, when its handler is set: a peer may talk before this side is ready.
// Beyond the bound they are counted in dropped().
//
// Install with options.on_message = router->AsHandler() before creating the
// transport (the router must outlive the transport). Handlers run on the
// transport's progress thread (parked ones on the SetHandler caller's
// thread), one at a time, and must not block or call SetHandler/RemoveHandler.
// Thread-safe.
#ifndef ONEFLOW_LITE_COMM_MESSAGE_ROUTER_H_
#define ONEFLOW_LITE_COMM_MESSAGE_ROUTER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

class MessageRouter {
 public:
  static constexpr size_t kChannelHeaderSize = 4;
  static constexpr size_t kMaxParked = 1 << 16;

  void SetHandler(uint32_t channel, MessageHandler handler);
  void RemoveHandler(uint32_t channel);
  MessageHandler AsHandler();
  uint64_t dropped() const { return dropped_; }

  // Prefixes `payload` with the channel id and sends it.
  static Status Send(Connection* connection, uint32_t channel,
                     const std::string& payload);
  // Starts a message for `channel`: its header, with room reserved for
  // `payload_bytes` more, which the caller appends. Messages built this way
  // go out together through Connection::SendMessages.
  static std::string StartMessage(uint32_t channel, size_t payload_bytes);
  // Writes the header StartMessage begins a message with (the channel id,
  // kChannelHeaderSize bytes) at `out`: for senders that lay out a message's
  // head in a buffer of their own (Connection::SendMessageParts).
  static void WriteChannelHeader(uint32_t channel, uint8_t* out);

 private:
  void Dispatch(int peer_rank, const void* data, size_t size);

  std::mutex mutex_;
  std::map<uint32_t, MessageHandler> handlers_;
  std::map<uint32_t, std::vector<std::pair<int, std::string>>> parked_;
  size_t parked_count_ = 0;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_MESSAGE_ROUTER_H_
