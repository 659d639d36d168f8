// GemmOrientation: the transpose helper, results equal to the direct GEMM's
// bit for bit on every call (with OpenBLAS and oneDNN, with and without
// operands of an aliasing stride), the choice made after the measured
// calls, a route that would change the bits never chosen, padded copies
// taken where the stride slows the GEMM, a hopeless route dropped after
// the first call, small products left direct, a new shape measured again.
#include "oneflow_lite/kernels/cpu/math/gemm_orientation.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "oneflow_lite/kernels/cpu/onednn/onednn.h"

namespace oflite {
namespace math {
namespace {

using Choice = GemmOrientation::Choice;

void Blas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.f, c, static_cast<int>(n));
}

void OneDnn(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float* c) {
  ASSERT_TRUE(onednn::Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.f, c, n).ok());
}

// C = alpha op(A) op(B) by a plain loop, summing k ascending or descending,
// `reps` times over (a slow GEMM).
void LoopGemm(bool ascending, int reps, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float* c) {
  for (int rep = 0; rep < reps; ++rep) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0;
        for (int64_t q = 0; q < k; ++q) {
          const int64_t p = ascending ? q : k - 1 - q;
          sum += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
        }
        c[i * n + j] = alpha * sum;
      }
    }
  }
}

// A plain triple loop whose order of summation depends on the product's
// shape (k ascending when m >= n, descending otherwise), so its two
// orientations round differently; the m >= n orientation does its work
// `slow` times over.
struct ShapeDependentLoop {
  int slow = 1;
  bool same_order = false;
  void operator()(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float* c) const {
    LoopGemm(same_order || m >= n, m >= n ? slow : 1, ta, tb, m, n, k, alpha, a, lda, b, ldb, c);
  }
};

// A plain loop, the same order of summation for every shape and stride,
// that does its work `slow` times over when either operand's leading
// dimension is a multiple of kAliasingStride (as a GEMM reading such rows
// in place thrashes its cache sets), or, with `stride_order`, sums in the
// opposite order for such strides (so a padded copy rounds differently).
struct StrideSensitiveLoop {
  int slow = 1;
  bool stride_order = false;
  void operator()(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float* c) const {
    const bool aliasing = lda % GemmOrientation::kAliasingStride == 0 ||
                          ldb % GemmOrientation::kAliasingStride == 0;
    LoopGemm(!(stride_order && aliasing), aliasing ? slow : 1, ta, tb, m, n, k, alpha, a, lda, b,
             ldb, c);
  }
};

std::vector<float> Values(int64_t count, int seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    v[static_cast<size_t>(i)] = static_cast<float>((i * 7919 + seed * 104729) % 2003) / 1000.f - 1.f;
  }
  return v;
}

struct Operands {
  int64_t m, n, k, lda, ldb;
  std::vector<float> a, b;
  Operands(bool ta, bool tb, int64_t m_, int64_t n_, int64_t k_) : m(m_), n(n_), k(k_) {
    lda = ta ? m : k;
    ldb = tb ? k : n;
    a = Values(m * k, 1);
    b = Values(k * n, 2);
  }
};

TEST(GemmOrientationTest, TransposeTurnsRowsIntoColumns) {
  const int64_t rows = 37, cols = 45;  // not multiples of the tile
  const std::vector<float> src = Values(rows * cols, 3);
  std::vector<float> dst(src.size(), -9.f);
  GemmOrientation::Transpose(src.data(), rows, cols, dst.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(dst[c * rows + r], src[r * cols + c]) << r << "," << c;
    }
  }
}

// Every call, measuring or decided, gives the direct GEMM's bits, in all
// four transpose modes, with both libraries the kernels use.
TEST(GemmOrientationTest, EveryCallGivesTheDirectGemmsBits) {
  struct Library {
    const char* name;
    GemmOrientation::Gemm gemm;
  };
  std::vector<Library> libraries = {{"openblas", Blas}};
  if (onednn::Available()) libraries.push_back({"onednn", OneDnn});
  for (const Library& library : libraries) {
    for (int mode = 0; mode < 4; ++mode) {
      const bool ta = mode & 1, tb = mode & 2;
      // 18.1M multiply-adds: measured; then leading dimensions of 256
      // and 512 floats (aliasing: the padded routes are tried too).
      for (Operands o : {Operands(ta, tb, 320, 208, 272), Operands(ta, tb, 256, 512, 256)}) {
        ASSERT_GE(o.m * o.n * o.k, GemmOrientation::kMinWork);
        std::vector<float> want(static_cast<size_t>(o.m * o.n)), got(want.size());
        library.gemm(ta, tb, o.m, o.n, o.k, 0.5f, o.a.data(), o.lda, o.b.data(), o.ldb,
                     want.data());
        GemmOrientation orientation(library.gemm);
        for (int call = 0; call < GemmOrientation::kSettlingCalls + 2; ++call) {
          std::fill(got.begin(), got.end(), -7.f);
          orientation.Run(ta, tb, o.m, o.n, o.k, 0.5f, o.a.data(), o.lda, o.b.data(), o.ldb,
                          got.data());
          ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
              << library.name << " ta " << ta << " tb " << tb << " m " << o.m << " call "
              << call;
        }
        EXPECT_NE(orientation.choice(), Choice::kMeasuring)
            << library.name << " mode " << mode << " m " << o.m;
      }
    }
  }
}

// The transposed orientation of ShapeDependentLoop is four times faster
// but rounds differently: never chosen. With one order of summation for
// both, the same speed-up is taken.
TEST(GemmOrientationTest, TheFasterOrientationIsTakenOnlyIfItGivesTheSameBits) {
  Operands o(false, false, 260, 250, 260);  // m >= n: the direct call is the slow one
  ASSERT_GE(o.m * o.n * o.k, GemmOrientation::kMinWork);
  std::vector<float> want(static_cast<size_t>(o.m * o.n)), got(want.size());
  for (bool same_order : {false, true}) {
    ShapeDependentLoop loop;
    loop.slow = 4;
    loop.same_order = same_order;
    loop(false, false, o.m, o.n, o.k, 1.f, o.a.data(), o.lda, o.b.data(), o.ldb, want.data());
    GemmOrientation orientation(loop);
    for (int call = 0; call <= 2 * GemmOrientation::kSamples + 1; ++call) {
      orientation.Run(false, false, o.m, o.n, o.k, 1.f, o.a.data(), o.lda, o.b.data(), o.ldb,
                      got.data());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << "same_order " << same_order << " call " << call;
    }
    EXPECT_EQ(orientation.choice(), same_order ? Choice::kTransposed : Choice::kDirect)
        << "same_order " << same_order;
  }
}

// Operands of an aliasing stride that slow the GEMM 4x: the padded copies
// are taken (either orientation: the turned one also pays the transpose,
// but samples on a loaded machine may not show it). If the copies round
// differently, never.
TEST(GemmOrientationTest, PaddedCopiesAreTakenWhereTheStrideSlowsTheGemm) {
  Operands o(true, false, 256, 256, 256);  // A^T B: lda 256, ldb 256
  ASSERT_GE(o.m * o.n * o.k, GemmOrientation::kMinWork);
  ASSERT_EQ(o.lda % GemmOrientation::kAliasingStride, 0);
  std::vector<float> want(static_cast<size_t>(o.m * o.n)), got(want.size());
  for (bool stride_order : {false, true}) {
    StrideSensitiveLoop loop;
    loop.slow = 4;
    loop.stride_order = stride_order;
    loop(true, false, o.m, o.n, o.k, 1.f, o.a.data(), o.lda, o.b.data(), o.ldb, want.data());
    GemmOrientation orientation(loop);
    for (int call = 0; call < GemmOrientation::kSettlingCalls + 1; ++call) {
      std::fill(got.begin(), got.end(), -7.f);
      orientation.Run(true, false, o.m, o.n, o.k, 1.f, o.a.data(), o.lda, o.b.data(), o.ldb,
                      got.data());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << "stride_order " << stride_order << " call " << call;
    }
    if (stride_order) {
      // Not padded; the turned route reads the same strides, so it is no
      // faster, but a loaded machine's samples may pick it.
      EXPECT_TRUE(orientation.choice() == Choice::kDirect ||
                  orientation.choice() == Choice::kTransposed)
          << static_cast<int>(orientation.choice());
    } else {
      // Both padded routes escape the slow-down; the turned one also
      // transposes C, so it should lose, but on a loaded machine a
      // sample may not say so: either padded route passes.
      EXPECT_TRUE(orientation.choice() == Choice::kPadded ||
                  orientation.choice() == Choice::kPaddedTransposed)
          << static_cast<int>(orientation.choice());
    }
  }
}

// Leading dimensions that are no multiple of kAliasingStride get no padded
// route, however slow the GEMM.
TEST(GemmOrientationTest, OtherStridesAreNotPadded) {
  Operands o(true, false, 264, 248, 264);  // lda 264, ldb 248
  ASSERT_GE(o.m * o.n * o.k, GemmOrientation::kMinWork);
  int calls = 0;
  GemmOrientation orientation([&](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float* a, int64_t lda, const float* b, int64_t ldb,
                                  float* c) {
    ++calls;
    EXPECT_TRUE((lda == 264 && ldb == 248) || (lda == 248 && ldb == 264)) << lda << " " << ldb;
    StrideSensitiveLoop()(ta, tb, m, n, k, alpha, a, lda, b, ldb, c);
  });
  std::vector<float> got(static_cast<size_t>(o.m * o.n));
  orientation.Run(true, false, o.m, o.n, o.k, 1.f, o.a.data(), o.lda, o.b.data(), o.ldb,
                  got.data());
  EXPECT_EQ(calls, 2);  // direct and transposed, no padded route
}

// An orientation four times slower than the direct one on the first call
// is dropped at once, without the timed calls.
TEST(GemmOrientationTest, AHopelessOrientationIsDroppedAfterTheFirstCall) {
  Operands o(false, false, 250, 260, 260);  // m < n: the turned call (m >= n) is the slow one
  ASSERT_GE(o.m * o.n * o.k, GemmOrientation::kMinWork);
  ShapeDependentLoop loop;
  loop.slow = 4;
  loop.same_order = true;
  std::vector<float> want(static_cast<size_t>(o.m * o.n)), got(want.size());
  loop(false, false, o.m, o.n, o.k, 1.f, o.a.data(), o.lda, o.b.data(), o.ldb, want.data());
  GemmOrientation orientation(loop);
  orientation.Run(false, false, o.m, o.n, o.k, 1.f, o.a.data(), o.lda, o.b.data(), o.ldb,
                  got.data());
  EXPECT_EQ(orientation.choice(), Choice::kDirect);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
}

// With a GEMM whose turned orientation (same order of summation) does a
// quarter of the work, so that the first call's timing cannot end the
// measuring under any load (a library GEMM's two orientations can differ
// by more than kHopeless on a busy machine).
TEST(GemmOrientationTest, SmallProductsRunDirectAndANewShapeIsMeasuredAgain) {
  Operands small(false, true, 64, 64, 64);
  std::vector<float> c(static_cast<size_t>(320 * 208));
  ShapeDependentLoop loop;
  loop.slow = 4;
  loop.same_order = true;
  GemmOrientation orientation(loop);
  orientation.Run(false, true, small.m, small.n, small.k, 1.f, small.a.data(), small.lda,
                  small.b.data(), small.ldb, c.data());
  EXPECT_EQ(orientation.choice(), Choice::kDirect);
  Operands large(false, true, 320, 208, 272);
  orientation.Run(false, true, large.m, large.n, large.k, 1.f, large.a.data(), large.lda,
                  large.b.data(), large.ldb, c.data());
  EXPECT_EQ(orientation.choice(), Choice::kMeasuring);
  orientation.Run(false, true, small.m, small.n, small.k, 1.f, small.a.data(), small.lda,
                  small.b.data(), small.ldb, c.data());
  EXPECT_EQ(orientation.choice(), Choice::kDirect);
}

}  // namespace
}  // namespace math
}  // namespace oflite
