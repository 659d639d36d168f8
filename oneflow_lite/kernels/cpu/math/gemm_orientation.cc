#include "oneflow_lite/kernels/cpu/math/gemm_orientation.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "oneflow_lite/kernels/cpu/math/strided_loop.h"

namespace oflite {
namespace math {
namespace {

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void GemmOrientation::Transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  // dst row c (of `rows` elements) is src's column c.
  CopyTransposedTiles(src, cols, dst, rows, cols, rows);
}

void GemmOrientation::Direct(const Shape& s, float alpha, const float* a, const float* b,
                             float* c) {
  gemm_(s.transpose_a, s.transpose_b, s.m, s.n, s.k, alpha, a, s.lda, b, s.ldb, c);
}

void GemmOrientation::Transposed(const Shape& s, float alpha, const float* a, const float* b,
                                 float* c) {
  // C^T[n, m] = op(B)^T op(A)^T: B's storage read with the opposite
  // transpose flag is op(B)^T, likewise A's.
  scratch_.resize(static_cast<size_t>(s.m * s.n));
  gemm_(!s.transpose_b, !s.transpose_a, s.n, s.m, s.k, alpha, b, s.ldb, a, s.lda,
        scratch_.data());
  Transpose(scratch_.data(), s.n, s.m, c);
}

void GemmOrientation::Decide() {
  const double direct = *std::min_element(direct_us_.begin(), direct_us_.end());
  const double transposed = *std::min_element(transposed_us_.begin(), transposed_us_.end());
  choice_ = transposed < (1.0 - kMargin) * direct ? Choice::kTransposed : Choice::kDirect;
  direct_us_.clear();
  transposed_us_.clear();
  if (choice_ == Choice::kDirect) std::vector<float>().swap(scratch_);
}

void GemmOrientation::Run(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float* c) {
  const Shape shape{transpose_a, transpose_b, m, n, k, lda, ldb};
  if (!(shape == shape_)) {
    shape_ = shape;
    calls_ = 0;
    direct_us_.clear();
    transposed_us_.clear();
    const bool worth_measuring = m > 1 && n > 1 && m * n * k >= kMinWork;
    choice_ = worth_measuring ? Choice::kMeasuring : Choice::kDirect;
    if (!worth_measuring) std::vector<float>().swap(scratch_);
  }
  switch (choice_) {
    case Choice::kDirect:
      Direct(shape, alpha, a, b, c);
      return;
    case Choice::kTransposed:
      Transposed(shape, alpha, a, b, c);
      return;
    case Choice::kMeasuring:
      break;
  }
  const int call = calls_++;
  if (call == 0) {
    // Both orientations (the operands' first touch, so not samples); the
    // transposed one is an option only if it gives the same bits, and only
    // if it took less than kHopeless times the direct one's time: a shape
    // it cannot win (a large square C, whose transpose alone costs more
    // than the GEMM) does not pay for three more slow calls. The direct
    // call runs first, on the colder caches, which favours the other.
    double start = NowUs();
    Direct(shape, alpha, a, b, c);
    const double direct_us = NowUs() - start;
    std::vector<float> check(static_cast<size_t>(m * n));
    start = NowUs();
    Transposed(shape, alpha, a, b, check.data());
    const double transposed_us = NowUs() - start;
    const bool same = std::memcmp(c, check.data(), check.size() * sizeof(float)) == 0;
    if (!same || transposed_us > kHopeless * direct_us) {
      choice_ = Choice::kDirect;
      std::vector<float>().swap(scratch_);
    }
    return;
  }
  const double start = NowUs();
  if (call % 2 == 1) {
    Direct(shape, alpha, a, b, c);
    direct_us_.push_back(NowUs() - start);
  } else {
    Transposed(shape, alpha, a, b, c);
    transposed_us_.push_back(NowUs() - start);
  }
  if (call == 2 * kSamples) Decide();
}

}  // namespace math
}  // namespace oflite
