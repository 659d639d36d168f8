// Fuzz target for the CommNet wire decoders: TCP frame headers, HELLO
// payloads, and control-plane frames. Built two ways:
//  * frame_fuzz_test (gcc, cc_test): a bounded deterministic corpus of
//    random inputs and mutations of valid frames (frame_fuzz_test.cc);
//  * with clang: clang++ -fsanitize=fuzzer,address (run_frame_fuzzer.sh).
// Beyond "no crash", it checks properties: a header that decodes re-encodes
// to the same 48 bytes; decoded lengths obey the limits; a HELLO that
// decodes re-encodes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "oneflow_lite/comm/control/control_wire.h"
#include "oneflow_lite/comm/tcp/frame.h"

namespace {

void Require(bool condition) {
  if (!condition) std::abort();
}

void CheckFrameStream(const uint8_t* data, size_t size) {
  using namespace oflite::comm::tcp;
  FrameLimits limits;
  limits.max_message_size = 4096;
  limits.max_transfer_size = 1u << 30;
  size_t at = 0;
  while (size - at >= kFrameHeaderSize) {
    FrameHeader header;
    if (!DecodeFrameHeader(data + at, limits, &header).ok()) return;
    uint8_t again[kFrameHeaderSize];
    EncodeFrameHeader(header, again);
    Require(std::memcmp(again, data + at, kFrameHeaderSize) == 0);
    Require(header.payload_length <= limits.max_transfer_size);
    if (header.type == FrameType::kMessage) {
      Require(header.payload_length <= limits.max_message_size);
    }
    at += kFrameHeaderSize;
    const size_t payload = std::min<uint64_t>(header.payload_length, size - at);
    if (header.type == FrameType::kHello || header.type == FrameType::kHelloAck) {
      auto hello = DecodeHello(data + at, payload);
      if (hello.ok()) {
        Require(hello->rank < hello->world_size);
        Require(hello->job_token.size() <= kMaxJobTokenSize);
        Require(EncodeHello(*hello) == std::string(reinterpret_cast<const char*>(data + at), payload));
      }
    }
    at += payload;
  }
}

void CheckControl(const uint8_t* data, size_t size) {
  using namespace oflite::comm::control;
  if (size < kControlHeaderSize) return;
  ControlType type;
  uint32_t length = 0;
  if (!DecodeControlHeader(data, &type, &length).ok()) return;
  Require(length <= kMaxControlPayload);
  const size_t available = std::min<size_t>(length, size - kControlHeaderSize);
  auto message = DecodeControlPayload(
      type, std::string(reinterpret_cast<const char*>(data + kControlHeaderSize), available));
  if (message.ok()) {
    // A decoded message re-encodes to its header and payload.
    std::string encoded = EncodeControlMessage(*message);
    Require(encoded.size() == kControlHeaderSize + available);
    Require(std::memcmp(encoded.data() + kControlHeaderSize, data + kControlHeaderSize,
                        available) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckFrameStream(data, size);
  CheckControl(data, size);
  return 0;
}
