#include "oneflow_lite/kernels/cpu/math/gemm_orientation.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
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

bool Aliasing(int64_t ld) { return ld % GemmOrientation::kAliasingStride == 0; }

// A padded copy of a row-major operand of `rows` rows whose used width is
// `cols`: rows kPadding floats longer than `cols` rounded up to kPadding,
// 64-byte aligned. The copies live per thread (a thread runs one GEMM at a
// time), so kernel instances share them instead of each keeping its own.
struct PaddedCopy {
  std::vector<float> storage;
  const float* data = nullptr;
  int64_t ld = 0;

  void Fill(const float* src, int64_t src_ld, int64_t rows, int64_t cols) {
    constexpr int64_t kPad = GemmOrientation::kPadding;
    ld = (cols + kPad - 1) / kPad * kPad + kPad;
    constexpr size_t kAlignFloats = 64 / sizeof(float);
    storage.resize(static_cast<size_t>(rows * ld) + kAlignFloats);
    float* base = storage.data();
    const size_t misalign = (reinterpret_cast<uintptr_t>(base) / sizeof(float)) % kAlignFloats;
    float* dst = base + (misalign == 0 ? 0 : kAlignFloats - misalign);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(dst + r * ld, src + r * src_ld, static_cast<size_t>(cols) * sizeof(float));
    }
    data = dst;
  }
};

}  // namespace

void GemmOrientation::Transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  // dst row c (of `rows` elements) is src's column c.
  CopyTransposedTiles(src, cols, dst, rows, cols, rows);
}

void GemmOrientation::Oriented(bool turned, const Shape& s, float alpha, const float* a,
                               int64_t lda, const float* b, int64_t ldb, float* c) {
  if (!turned) {
    gemm_(s.transpose_a, s.transpose_b, s.m, s.n, s.k, alpha, a, lda, b, ldb, c);
    return;
  }
  // C^T[n, m] = op(B)^T op(A)^T: B's storage read with the opposite
  // transpose flag is op(B)^T, likewise A's.
  scratch_.resize(static_cast<size_t>(s.m * s.n));
  gemm_(!s.transpose_b, !s.transpose_a, s.n, s.m, s.k, alpha, b, ldb, a, lda, scratch_.data());
  Transpose(scratch_.data(), s.n, s.m, c);
}

void GemmOrientation::RunRoute(Choice route, const Shape& s, float alpha, const float* a,
                               const float* b, float* c) {
  if (!Padded(route)) {
    Oriented(Turned(route), s, alpha, a, s.lda, b, s.ldb, c);
    return;
  }
  // Storage: A is [k, m] when transposed, else [m, k]; B likewise.
  thread_local PaddedCopy padded_a, padded_b;
  const float* pa = a;
  const float* pb = b;
  int64_t lda = s.lda, ldb = s.ldb;
  if (Aliasing(s.lda)) {
    padded_a.Fill(a, s.lda, s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k);
    pa = padded_a.data;
    lda = padded_a.ld;
  }
  if (Aliasing(s.ldb)) {
    padded_b.Fill(b, s.ldb, s.transpose_b ? s.n : s.k, s.transpose_b ? s.k : s.n);
    pb = padded_b.data;
    ldb = padded_b.ld;
  }
  Oriented(Turned(route), s, alpha, pa, lda, pb, ldb, c);
}

void GemmOrientation::Decide() {
  auto fastest = [&](Choice route) {
    const std::vector<double>& us = us_[static_cast<int>(route)];
    return *std::min_element(us.begin(), us.end());
  };
  const double direct = fastest(Choice::kDirect);
  Choice best = Choice::kDirect;
  double best_us = direct;
  for (Choice route : candidates_) {
    if (fastest(route) < best_us) {
      best = route;
      best_us = fastest(route);
    }
  }
  choice_ = best_us < (1.0 - kMargin) * direct ? best : Choice::kDirect;
  candidates_.clear();
  us_.clear();
  if (!Turned(choice_)) std::vector<float>().swap(scratch_);
}

void GemmOrientation::Run(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float* c) {
  const Shape shape{transpose_a, transpose_b, m, n, k, lda, ldb};
  if (!(shape == shape_)) {
    shape_ = shape;
    calls_ = 0;
    candidates_.clear();
    us_.clear();
    const bool worth_measuring = m > 1 && n > 1 && m * n * k >= kMinWork;
    choice_ = worth_measuring ? Choice::kMeasuring : Choice::kDirect;
    if (!worth_measuring) std::vector<float>().swap(scratch_);
  }
  if (choice_ != Choice::kMeasuring) {
    RunRoute(choice_, shape, alpha, a, b, c);
    return;
  }
  const int call = calls_++;
  if (call == 0) {
    // Every route (the operands' first touch, so not samples); one is a
    // candidate only if it gives the direct route's bits, and only if it
    // took less than kHopeless times its time: a route that cannot win (a
    // large square C, whose transpose alone costs more than the GEMM) does
    // not pay for more slow calls. The direct call runs first, on the
    // colder caches, which favours the others.
    double start = NowUs();
    RunRoute(Choice::kDirect, shape, alpha, a, b, c);
    const double direct_us = NowUs() - start;
    candidates_.push_back(Choice::kDirect);
    std::vector<float> check(static_cast<size_t>(m * n));
    const bool paddable = Aliasing(lda) || Aliasing(ldb);
    for (Choice route : {Choice::kTransposed, Choice::kPadded, Choice::kPaddedTransposed}) {
      if (Padded(route) && !paddable) continue;
      start = NowUs();
      RunRoute(route, shape, alpha, a, b, check.data());
      const double route_us = NowUs() - start;
      const bool same = std::memcmp(c, check.data(), check.size() * sizeof(float)) == 0;
      if (same && route_us <= kHopeless * direct_us) candidates_.push_back(route);
    }
    if (candidates_.size() == 1) {
      choice_ = Choice::kDirect;
      candidates_.clear();
      std::vector<float>().swap(scratch_);
    } else {
      us_.assign(kRoutes, {});
    }
    return;
  }
  // Round-robin over the candidates, kSamples rounds.
  const Choice route = candidates_[static_cast<size_t>(call - 1) % candidates_.size()];
  const double start = NowUs();
  RunRoute(route, shape, alpha, a, b, c);
  us_[static_cast<int>(route)].push_back(NowUs() - start);
  if (call == kSamples * static_cast<int>(candidates_.size())) Decide();
}

}  // namespace math
}  // namespace oflite
