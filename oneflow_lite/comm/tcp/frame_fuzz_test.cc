// Runs the wire-decoder fuzz target (frame_fuzz.cc) over a deterministic,
// bounded corpus with gcc: random byte strings, and mutations (bit flips,
// byte sets, truncations, extensions, length-field rewrites) of valid TCP
// frames and control messages. The target aborts on any broken property.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/control/control_wire.h"
#include "oneflow_lite/comm/tcp/frame.h"
#include "oneflow_lite/comm/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace oflite {
namespace comm {
namespace tcp {
namespace {

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  auto frame = [](FrameType type, const std::string& payload, uint64_t length) {
    FrameHeader header;
    header.type = type;
    header.rkey = 0x1234;
    header.request_id = 7;
    header.address = 0x7f0000001000;
    header.length = length;
    header.payload_length = payload.size();
    uint8_t bytes[kFrameHeaderSize];
    EncodeFrameHeader(header, bytes);
    return std::string(reinterpret_cast<char*>(bytes), kFrameHeaderSize) + payload;
  };
  Hello hello{1, 4, 64, 4096, "token"};
  seeds.push_back(frame(FrameType::kHello, EncodeHello(hello), 0));
  seeds.push_back(frame(FrameType::kMessage, "hello world", 11));
  seeds.push_back(frame(FrameType::kWrite, std::string(100, 'w'), 100));
  seeds.push_back(frame(FrameType::kReadRequest, "", 4096));
  seeds.push_back(frame(FrameType::kCredit, "", 0) + frame(FrameType::kPing, "", 0));
  control::ControlMessage get;
  get.type = control::ControlType::kGet;
  get.key = "endpoint/1->0";
  get.timeout_ms = 100;
  seeds.push_back(control::EncodeControlMessage(get));
  control::ControlMessage response;
  response.status = 4;
  response.message = "timeout";
  response.value = std::string(10, 'v');
  seeds.push_back(control::EncodeControlMessage(response));
  return seeds;
}

std::string Mutate(std::string input, std::mt19937_64* random) {
  const int mutations = 1 + (*random)() % 4;
  for (int m = 0; m < mutations; ++m) {
    switch ((*random)() % 5) {
      case 0:  // flip a bit
        if (!input.empty()) input[(*random)() % input.size()] ^= 1 << ((*random)() % 8);
        break;
      case 1:  // set a byte
        if (!input.empty()) input[(*random)() % input.size()] = static_cast<char>((*random)());
        break;
      case 2:  // truncate
        input.resize((*random)() % (input.size() + 1));
        break;
      case 3:  // extend
        input.append((*random)() % 64, static_cast<char>((*random)()));
        break;
      case 4: {  // rewrite a 64-bit length field with an edge value
        static const uint64_t kEdges[] = {0, 1, 4095, 4096, 4097, 0xFFFFFFFFull,
                                          0xFFFFFFFFFFFFFFFFull, 1ull << 40};
        if (input.size() >= 48) {
          const size_t field = 24 + 8 * ((*random)() % 3);
          wire::StoreU64(reinterpret_cast<uint8_t*>(&input[field]), kEdges[(*random)() % 8]);
        }
        break;
      }
    }
  }
  return input;
}

TEST(FrameFuzzTest, SeedsDecode) {
  for (const std::string& seed : Seeds()) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seed.data()), seed.size());
  }
  // The HELLO seed decodes; a truncated one does not.
  const std::string hello = Seeds()[0].substr(kFrameHeaderSize);
  EXPECT_TRUE(DecodeHello(hello.data(), hello.size()).ok());
  EXPECT_FALSE(DecodeHello(hello.data(), hello.size() - 1).ok());
}

TEST(FrameFuzzTest, MutatedFramesNeverBreakTheDecoders) {
  std::mt19937_64 random(20261130);
  const auto seeds = Seeds();
  for (int i = 0; i < 300000; ++i) {
    std::string input = Mutate(seeds[i % seeds.size()], &random);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
}

TEST(FrameFuzzTest, RandomBytesNeverBreakTheDecoders) {
  std::mt19937_64 random(42);
  for (int i = 0; i < 100000; ++i) {
    std::string input(random() % 200, '\0');
    for (char& byte : input) byte = static_cast<char>(random());
    if (input.size() >= 4 && i % 2 == 0) {
      // Half of them start with a valid magic to get past the first check.
      wire::StoreU32(reinterpret_cast<uint8_t*>(&input[0]),
                     i % 4 == 0 ? kFrameMagic : control::kControlMagic);
      if (input.size() >= 6) wire::StoreU16(reinterpret_cast<uint8_t*>(&input[4]), 1);
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
}

}  // namespace
}  // namespace tcp
}  // namespace comm
}  // namespace oflite
