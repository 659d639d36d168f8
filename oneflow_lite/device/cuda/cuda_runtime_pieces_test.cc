// Zone allocation and completion polling on a real GPU (skipped without one).
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "oneflow_lite/device/cuda/cuda_backend.h"
#include "oneflow_lite/device/cuda/cuda_completion_queue.h"
#include "oneflow_lite/device/cuda/cuda_device_context.h"
#include "oneflow_lite/device/cuda/cuda_memory.h"
#include "oneflow_lite/device/cuda/fill.h"

namespace oflite {
namespace {

class CudaRuntimePiecesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

TEST_F(CudaRuntimePiecesTest, DeviceAndPinnedZonesAreZeroedAndCopyable) {
  auto device = CudaMemoryBlock::AllocateDevice(0, 4096 * sizeof(float), "m0/cuda:0");
  ASSERT_TRUE(device.ok()) << device.status();
  auto pinned = CudaMemoryBlock::AllocatePinnedHost(4096 * sizeof(float), "m0/pinned_host");
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  const float* host = reinterpret_cast<const float*>((*pinned)->data());
  EXPECT_EQ(host[4095], 0.f);
  ASSERT_EQ(cudaMemcpy((*pinned)->data(), (*device)->data(), (*device)->size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(host[i], 0.f) << i;
  auto empty = CudaMemoryBlock::AllocateDevice(0, 0, "m0/cuda:0");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->data(), nullptr);
}

TEST_F(CudaRuntimePiecesTest, ImpossibleZoneNamesTheZone) {
  auto huge = CudaMemoryBlock::AllocateDevice(0, int64_t{1} << 50, "m0/cuda:0");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("m0/cuda:0"), std::string::npos) << huge.status();
  auto missing = CudaMemoryBlock::AllocateDevice(CudaDeviceCount() + 1, 16, "m0/cuda:9");
  ASSERT_FALSE(missing.ok());
}

TEST_F(CudaRuntimePiecesTest, CallbackRunsAfterTheStreamFinished) {
  auto ctx = CudaDeviceContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  auto queue = CudaCompletionQueue::Create(0);
  ASSERT_TRUE(queue.ok()) << queue.status();
  const int64_t n = 1 << 24;
  auto block = CudaMemoryBlock::AllocateDevice(0, n * sizeof(float), "m0/cuda:0");
  ASSERT_TRUE(block.ok());
  auto pinned = CudaMemoryBlock::AllocatePinnedHost(sizeof(float), "m0/pinned_host");
  ASSERT_TRUE(pinned.ok());
  float* out = reinterpret_cast<float*>((*pinned)->data());
  std::atomic<int> done{0};
  std::atomic<float> seen{0.f};
  for (int round = 1; round <= 5; ++round) {
    float* data = reinterpret_cast<float*>((*block)->data());
    ASSERT_EQ(LaunchFill(data, n, static_cast<float>(round), (*ctx)->stream()), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(out, data + n - 1, sizeof(float), cudaMemcpyDeviceToHost,
                              (*ctx)->stream()),
              cudaSuccess);
    ASSERT_TRUE((*queue)
                    ->Enqueue((*ctx)->stream(), "fill" + std::to_string(round),
                              [&, round](const Status& s) {
                                EXPECT_TRUE(s.ok()) << s;
                                seen = *static_cast<volatile float*>(out);
                                EXPECT_EQ(seen.load(), static_cast<float>(round));
                                ++done;
                              })
                    .ok());
    ASSERT_TRUE((*queue)->Drain(std::chrono::milliseconds(10000)).ok());
  }
  EXPECT_EQ(done.load(), 5);
}

// The backend's context calls back only once the stream passed the work
// enqueued before OnStreamDone, and without the caller synchronizing. A
// callback may run late (the poller runs behind the enqueuing thread: by
// then later rounds may have run too), so each round copies into its own
// slot of the pinned buffer; the slot still reads 0 (the zeroed zone) if a
// callback ran before its copy landed.
TEST_F(CudaRuntimePiecesTest, BackendContextIsAsyncAndCallsBackAfterItsCopies) {
  constexpr int kRounds = 3;
  constexpr int64_t n = 1 << 20;  // 4 MiB a round: a copy takes a while
  StatusOr<std::unique_ptr<DeviceBackend>> backend = CreateDeviceBackend(DEVICE_CUDA);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto device = (*backend)->AllocateDevice(0, kRounds * n * sizeof(float), "m0/cuda:0");
  ASSERT_TRUE(device.ok()) << device.status();
  auto pinned = (*backend)->AllocatePinnedHost(kRounds * n * sizeof(float), "m0/pinned_host");
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  std::atomic<int> done{0};
  {
    auto context = (*backend)->CreateStreamContext(0, "m0/cuda0/s0");
    ASSERT_TRUE(context.ok()) << context.status();
    ASSERT_TRUE((*context)->BindToCurrentThread().ok());
    ASSERT_TRUE((*context)->IsAsync());
    const auto* cuda = static_cast<const CudaDeviceContext*>(context->get());
    for (int round = 1; round <= kRounds; ++round) {
      float* host = reinterpret_cast<float*>((*pinned)->data()) + (round - 1) * n;
      float* data = reinterpret_cast<float*>((*device)->data()) + (round - 1) * n;
      ASSERT_EQ(LaunchFill(data, n, static_cast<float>(round), cuda->stream()), cudaSuccess);
      ASSERT_TRUE((*context)->Memcpy(host, data, n * sizeof(float), CopyKind::kDeviceToHost).ok());
      ASSERT_TRUE((*context)
                      ->OnStreamDone("round" + std::to_string(round),
                                     [&, round, host](const Status& s) {
                                       EXPECT_TRUE(s.ok()) << s;
                                       const volatile float* slot = host;
                                       EXPECT_EQ(slot[0], static_cast<float>(round));
                                       EXPECT_EQ(slot[n - 1], static_cast<float>(round));
                                       ++done;
                                     })
                      .ok());
    }
  }  // the context synchronizes its stream and waits for its callbacks
  EXPECT_EQ(done.load(), kRounds);
}

}  // namespace
}  // namespace oflite
