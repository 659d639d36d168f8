// Internal: sends/receives one control frame on a blocking-with-deadline
// socket (socket_util.h). Errors name `peer`.
#ifndef ONEFLOW_LITE_COMM_CONTROL_CHANNEL_H_
#define ONEFLOW_LITE_COMM_CONTROL_CHANNEL_H_

#include <string>

#include "oneflow_lite/comm/control/control_wire.h"
#include "oneflow_lite/comm/socket_util.h"

namespace oflite {
namespace comm {
namespace control {

inline Status SendControl(int fd, const ControlMessage& message,
                          Deadline deadline, const std::string& peer) {
  const std::string frame = EncodeControlMessage(message);
  return WriteFull(fd, frame.data(), frame.size(), deadline, peer);
}

inline StatusOr<ControlMessage> ReceiveControl(int fd, Deadline deadline,
                                               const std::string& peer) {
  uint8_t header[kControlHeaderSize];
  RETURN_IF_ERROR(ReadFull(fd, header, sizeof(header), deadline, peer));
  ControlType type;
  uint32_t length = 0;
  Status valid = DecodeControlHeader(header, &type, &length);
  if (!valid.ok()) return valid.WithContext(peer);
  std::string payload(length, '\0');
  RETURN_IF_ERROR(ReadFull(fd, &payload[0], length, deadline, peer));
  auto message = DecodeControlPayload(type, payload);
  if (!message.ok()) return message.status().WithContext(peer);
  return message;
}

}  // namespace control
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_CONTROL_CHANNEL_H_
