// onednn.h on its own: Sgemm against a plain triple loop at odd sizes and
// every transpose, BatchedMatmul against per-entry Sgemm calls, and the OpenMP team size of the calling thread following
// the cpu_threads setting. The conv2d passes are tested through the kernels
// against the reference kernels (kernels/cpu/nn/conv_onednn_test.cc).
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"

namespace oflite {
namespace onednn {
namespace {

std::vector<float> Random(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = uniform(rng);
  return v;
}

TEST(OneDnnTest, SgemmMatchesAPlainLoop) {
  if (!Available()) GTEST_SKIP() << Description();
  const int64_t sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 1, 33}, {64, 10, 256}, {31, 29, 130}};
  for (const auto& s : sizes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const int64_t lda = ta ? m + 2 : k + 1, ldb = tb ? k + 3 : n, ldc = n + 1;  // padded rows
      std::vector<float> a = Random((ta ? k : m) * lda, 1), b = Random((tb ? n : k) * ldb, 2);
      std::vector<float> c = Random(m * ldc, 3), expected = c;
      const float alpha = 0.5f, beta = t == 3 ? 0.0f : 2.0f;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p) {
            sum += double(ta ? a[p * lda + i] : a[i * lda + p]) *
                   double(tb ? b[j * ldb + p] : b[p * ldb + j]);
          }
          expected[i * ldc + j] = float(alpha * sum + beta * expected[i * ldc + j]);
        }
      }
      ASSERT_TRUE(Sgemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc)
                      .ok());
      for (int64_t i = 0; i < m * ldc; ++i) {
        ASSERT_NEAR(c[i], expected[i], 1e-4 * std::max(1.0f, std::fabs(expected[i])))
            << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb << " at " << i;
      }
    }
  }
}

// BatchedMatmul must take the shapes matmul gives it (not refuse them, which
// would silently leave the kernel on its loop) and match per-entry GEMMs,
// with either operand broadcast along a batch axis, every transpose and
// two thread counts.
TEST(OneDnnTest, BatchedMatmulMatchesPerEntryGemms) {
  if (!Available()) GTEST_SKIP() << Description();
  const int64_t m = 7, n = 5, k = 9;
  const std::vector<int64_t> a_batch = {3, 1, 4}, b_batch = {3, 2, 1}, c_batch = {3, 2, 4};
  for (int threads : {1, 2}) {
    SetCpuComputeThreads(threads);
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      std::vector<float> a = Random(12 * m * k, 4), b = Random(6 * k * n, 5);
      std::vector<float> c(24 * m * n), expected(24 * m * n);
      auto matmul = BatchedMatmul::Create(a_batch, b_batch, ta, tb, m, n, k, 0.5f);
      ASSERT_TRUE(matmul.ok()) << matmul.status();
      ASSERT_TRUE((*matmul)->Run(a.data(), b.data(), c.data()).ok());
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t j = 0; j < 2; ++j) {
          for (int64_t l = 0; l < 4; ++l) {
            const int64_t entry = (i * 2 + j) * 4 + l;
            ASSERT_TRUE(Sgemm(ta, tb, m, n, k, 0.5f, &a[(i * 4 + l) * m * k], ta ? m : k,
                              &b[(i * 2 + j) * k * n], tb ? k : n, 0.0f,
                              &expected[entry * m * n], n)
                            .ok());
          }
        }
      }
      for (size_t i = 0; i < c.size(); ++i) {
        ASSERT_NEAR(c[i], expected[i], 1e-4 * std::max(1.0f, std::fabs(expected[i])))
            << "ta=" << ta << " tb=" << tb << " threads=" << threads << " at " << i;
      }
    }
  }
  SetCpuComputeThreads(1);
}

TEST(OneDnnTest, TheCallingThreadsTeamFollowsCpuThreads) {
  if (!Available()) GTEST_SKIP() << Description();
  for (int threads : {1, 2, 3}) {
    SetCpuComputeThreads(threads);
    int team = -1;
    std::thread stream([&] {
      omp_set_num_threads(7);  // whatever the thread had before
      const int64_t n = 256;  // n^3 = 16M multiply-adds: up to 4 threads
      std::vector<float> a(n * n, 1.0f), c(n * n);
      ASSERT_TRUE(Sgemm(false, false, n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f, c.data(), n)
                      .ok());
      EXPECT_EQ(c[0], float(n));
      team = omp_get_max_threads();
    });
    stream.join();
    EXPECT_EQ(team, threads);
  }
}

TEST(OneDnnTest, ASmallGemmStaysOnTheCallingThread) {
  if (!Available()) GTEST_SKIP() << Description();
  SetCpuComputeThreads(2);
  int team = -1;
  std::thread stream([&] {
    std::vector<float> a(16 * 784, 1.0f), b(784 * 64, 1.0f), c(16 * 64);  // 0.8M multiply-adds
    ASSERT_TRUE(Sgemm(false, false, 16, 64, 784, 1.0f, a.data(), 784, b.data(), 64, 0.0f,
                      c.data(), 64)
                    .ok());
    EXPECT_EQ(c[0], 784.0f);
    team = omp_get_max_threads();
  });
  stream.join();
  EXPECT_EQ(team, 1);
}

}  // namespace
}  // namespace onednn
}  // namespace oflite
