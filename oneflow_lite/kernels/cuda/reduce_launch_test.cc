// LaunchReduceSum with and without the split path, on integer-valued
// inputs whose sums every path computes exactly (small terms of both signs,
// partial sums far below 2^24): a term lost or counted twice, or a partial
// written to the wrong slot, changes an output, and a correct launch matches
// the host's int64 sums bit for bit. The geometries are the ones training
// reaches: a convolution's bias gradient (axes 0, 2, 3) at LeNet-5's
// batches, a column sum over many rows, a sum over everything, and sizes
// that leave the last split block short or empty. Skipped without a GPU.
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "gtest/gtest.h"
#include "oneflow_lite/kernels/cuda/math_launch.h"

namespace oflite {
namespace cuda {
namespace {

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

// A term in [-3, 3], of both signs, from the element's position.
float Term(int64_t i) {
  uint64_t h = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return static_cast<float>(static_cast<int64_t>(h % 7) - 3);
}

std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * dims[i + 1];
  }
  return strides;
}

StridedIndex Index(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  StridedIndex index;
  index.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    index.dims[d] = dims[d];
    index.strides[0][d] = strides[d];
  }
  return index;
}

struct Case {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<bool> reduced;
};

class ReduceLaunchTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    for (void* p : allocations_) cudaFree(p);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void* Allocate(size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    allocations_.push_back(p);
    return p;
  }

  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocations_;
};

TEST_P(ReduceLaunchTest, SplitAndUnsplitSumsAreExact) {
  const Case& c = GetParam();
  const std::vector<int64_t> strides = Strides(c.shape);
  std::vector<int64_t> outer_dims, outer_strides, inner_dims, inner_strides;
  int64_t total = 1;
  for (size_t d = 0; d < c.shape.size(); ++d) {
    (c.reduced[d] ? inner_dims : outer_dims).push_back(c.shape[d]);
    (c.reduced[d] ? inner_strides : outer_strides).push_back(strides[d]);
    total *= c.shape[d];
  }
  const StridedIndex outer = Index(outer_dims, outer_strides);
  const StridedIndex inner = Index(inner_dims, inner_strides);
  const int64_t out_count = outer.Count(), inner_count = inner.Count();

  std::vector<float> x(total);
  for (int64_t i = 0; i < total; ++i) x[i] = Term(i);
  // The host's sums, walking the same index spaces.
  std::vector<int64_t> want(out_count, 0);
  for (int64_t o = 0; o < out_count; ++o) {
    int64_t base = 0, flat = o;
    for (int d = outer.rank - 1; d >= 0; --d) {
      base += (flat % outer.dims[d]) * outer.strides[0][d];
      flat /= outer.dims[d];
    }
    for (int64_t r = 0; r < inner_count; ++r) {
      int64_t offset = base;
      flat = r;
      for (int d = inner.rank - 1; d >= 0; --d) {
        offset += (flat % inner.dims[d]) * inner.strides[0][d];
        flat /= inner.dims[d];
      }
      want[o] += static_cast<int64_t>(x[offset]);
    }
  }

  float* dx = static_cast<float*>(Allocate(total * sizeof(float)));
  float* dy = static_cast<float*>(Allocate(out_count * sizeof(float)));
  double* partials = static_cast<double*>(Allocate(kReducePartials * sizeof(double)));
  ASSERT_EQ(cudaMemcpyAsync(dx, x.data(), total * sizeof(float), cudaMemcpyHostToDevice, stream_),
            cudaSuccess);
  // Garbage in the partials, as a buffer reused from the last call would hold.
  ASSERT_EQ(cudaMemsetAsync(partials, 0x7f, kReducePartials * sizeof(double), stream_),
            cudaSuccess);
  const int64_t splits = ReduceSplits(out_count, inner_count);
  for (double* with : {static_cast<double*>(nullptr), partials}) {
    SCOPED_TRACE(with == nullptr ? "one block per output" : "split over " + std::to_string(splits));
    ASSERT_EQ(cudaMemsetAsync(dy, 0xff, out_count * sizeof(float), stream_), cudaSuccess);
    ASSERT_EQ(LaunchReduceSum(dx, dy, outer, inner, 1.f, with, stream_), cudaSuccess);
    std::vector<float> got(out_count);
    ASSERT_EQ(cudaMemcpyAsync(got.data(), dy, out_count * sizeof(float), cudaMemcpyDeviceToHost,
                              stream_),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    int wrong = 0;
    for (int64_t o = 0; o < out_count; ++o) {
      if (got[o] != static_cast<float>(want[o]) && ++wrong <= 5) {
        ADD_FAILURE() << c.name << ": output " << o << " is " << got[o] << ", the exact sum is "
                      << want[o];
      }
    }
    EXPECT_EQ(wrong, 0) << c.name << ": " << wrong << " of " << out_count << " outputs wrong";
  }
  // The cases are chosen to reach the split path at all (else this test
  // would check the one-block path twice).
  if (c.name.rfind("nosplit", 0) != 0) {
    EXPECT_GT(splits, 1) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, ReduceLaunchTest,
    ::testing::Values(
        Case{"conv1_bias_grad_b64", {64, 6, 28, 28}, {true, false, true, true}},
        Case{"conv1_bias_grad_b256", {256, 6, 28, 28}, {true, false, true, true}},
        Case{"conv1_bias_grad_b4096", {4096, 6, 28, 28}, {true, false, true, true}},
        Case{"conv2_bias_grad_b4096", {4096, 16, 10, 10}, {true, false, true, true}},
        Case{"column_sum_20000x3", {20000, 3}, {true, false}},
        Case{"column_sum_99991x7", {99991, 7}, {true, false}},
        Case{"everything_1e6", {1000, 1000}, {true, true}},
        Case{"short_last_block", {4097 * 3 + 1, 2}, {true, false}},
        Case{"middle_axis", {5, 70001, 3}, {false, true, false}},
        Case{"nosplit_many_outputs", {300, 3000}, {true, false}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace cuda
}  // namespace oflite
