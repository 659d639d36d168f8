#include <gtest/gtest.h>

#include <vector>

#include "oneflow_lite/device/cuda/cuda_device_context.h"
#include "oneflow_lite/device/cuda/cuda_memory.h"
#include "oneflow_lite/device/cuda/fill.h"

namespace oflite {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

TEST_F(CudaDeviceTest, FillOnStreamRoundTrips) {
  auto ctx = CudaDeviceContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  const int64_t n = 1000003;
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(LaunchFill(d, n, 2.5f, (*ctx)->stream()), cudaSuccess);
  std::vector<float> h(n, 0.f);
  ASSERT_EQ(cudaMemcpyAsync(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost,
                            (*ctx)->stream()),
            cudaSuccess);
  ASSERT_TRUE((*ctx)->Synchronize().ok());
  for (int64_t i = 0; i < n; i += 9973) ASSERT_EQ(h[i], 2.5f) << i;
  EXPECT_EQ(h[n - 1], 2.5f);
  cudaFree(d);
}

// A device zone is zeroed before it is handed out: a work stream (non-
// blocking, so not ordered after the legacy stream's cudaMemset) reading
// it at once sees zeros, not the bytes a previous allocation left there.
TEST_F(CudaDeviceTest, FreshDeviceZoneReadsZeroFromAWorkStream) {
  auto ctx = CudaDeviceContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  const int64_t n = int64_t{64} << 20;  // 256 MiB of floats
  float* dirty = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dirty), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(LaunchFill(dirty, n, 7.f, (*ctx)->stream()), cudaSuccess);
  ASSERT_TRUE((*ctx)->Synchronize().ok());
  ASSERT_EQ(cudaFree(dirty), cudaSuccess);  // the zone below likely reuses these bytes
  auto zone = CudaMemoryBlock::AllocateDevice(0, n * sizeof(float), "test zone");
  ASSERT_TRUE(zone.ok()) << zone.status();
  std::vector<float> tail(1 << 20, -1.f);
  const char* last = (*zone)->data() + (n - static_cast<int64_t>(tail.size())) * sizeof(float);
  ASSERT_EQ(cudaMemcpyAsync(tail.data(), last, tail.size() * sizeof(float),
                            cudaMemcpyDeviceToHost, (*ctx)->stream()),
            cudaSuccess);
  ASSERT_TRUE((*ctx)->Synchronize().ok());
  for (size_t i = 0; i < tail.size(); i += 4099) ASSERT_EQ(tail[i], 0.f) << i;
  EXPECT_EQ(tail.back(), 0.f);
}

TEST_F(CudaDeviceTest, BadDeviceIndexIsAnError) {
  auto ctx = CudaDeviceContext::Create(CudaDeviceCount() + 3);
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.status().message().find("does not exist"), std::string::npos);
}

TEST(CudaStatusTest, ErrorsNameTheCall) {
  Status s = CudaStatus(cudaErrorInvalidValue, "cudaMemcpy(a, b)", "x.cc", 12);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cudaMemcpy(a, b)"), std::string::npos);
  EXPECT_NE(s.message().find("x.cc:12"), std::string::npos);
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x", "y", 1).ok());
}

}  // namespace
}  // namespace oflite
