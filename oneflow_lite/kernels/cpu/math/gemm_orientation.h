// Which way round, and from which copy of its operands, a kernel's GEMM
// runs faster.
//
// C[m, n] = op(A) op(B) can also be computed as its transpose,
// C^T[n, m] = op(B)^T op(A)^T, into a scratch buffer that is then
// transposed into C. GEMM libraries pack and block the two operands
// differently, so for some shapes one orientation is markedly faster: on the
// Intel Xeon VM, oneDNN's sgemm takes 3.1 ms for the GPT's MLP weight
// gradient (A^T B with m = 1024, n = 256, k = 768) and 2.4 ms for the
// transposed product plus the transpose. Which shapes gain depends on the
// library and the CPU (the same product with m and n swapped loses 1.5x), so
// a GemmOrientation measures instead of following a size rule.
//
// Either orientation can also run on padded copies of its operands. An
// operand whose rows lie a multiple of kAliasingStride floats (1 KiB) apart
// maps many rows onto the same few sets of the L1 cache, and a GEMM that
// reads it in place (oneDNN's "no-copy" kernels, which it picks for the
// GPT's shapes on AVX2) then runs at half speed: on a 2-core AMD EPYC
// (Zen 3) VM, A^T B with m = 256, n = 1024, k = 768 took 10.2 ms from
// operands with 256- and 1024-float rows and 5.4 ms from copies with 16
// floats of padding per row (copying both: 0.5 ms); the bits were the same.
// The padded routes are candidates only for such operands; the rows of a
// copy are 64-byte aligned.
//
// One object serves one call site of one kernel instance, whose shape
// rarely changes (the planned shapes), from one thread at a time:
//   - the first call of a shape runs every candidate route and compares
//     its result with the direct one's bit for bit; a route whose result
//     differs in any element (the library summed in another order) is
//     dropped, so the choice never changes a result; so is one that took
//     more than kHopeless times the direct call (a large square C: the
//     transpose of a 2048 x 2048 C costs more than the GEMM of a batch of
//     64);
//   - the next kSamples rounds run each remaining route once, timed;
//   - then the route with the fastest call is kept if its call beat the
//     direct route's fastest by more than kMargin; else direct.
// Products under kMinWork multiply-adds, and calls that accumulate into C
// (beta != 0), always run direct. A new shape starts over.
#ifndef ONEFLOW_LITE_KERNELS_CPU_MATH_GEMM_ORIENTATION_H_
#define ONEFLOW_LITE_KERNELS_CPU_MATH_GEMM_ORIENTATION_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace oflite {
namespace math {

class GemmOrientation {
 public:
  // Row-major C[m, n] = alpha * op(A) op(B), ldc = n (beta 0).
  using Gemm = std::function<void(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                                  int64_t k, float alpha, const float* a, int64_t lda,
                                  const float* b, int64_t ldb, float* c)>;

  static constexpr int64_t kMinWork = int64_t{1} << 24;  // multiply-adds
  static constexpr int kSamples = 3;
  static constexpr double kMargin = 0.05;
  static constexpr double kHopeless = 1.25;
  // Operands whose leading dimension is a multiple of this many floats are
  // also tried from padded copies, each row kPadding floats longer than
  // its used width rounded up to kPadding.
  static constexpr int64_t kAliasingStride = 256;
  static constexpr int64_t kPadding = 16;
  // The routes a shape can take: direct, transposed, and both from padded
  // copies (those two only for operands of an aliasing stride).
  static constexpr int kRoutes = 4;
  // At most this many calls of a new shape before its route is chosen:
  // the first runs every candidate, the next kSamples rounds run each
  // remaining one. A timing of the kernel (oflite profile) starts after
  // them, or it measures the choosing.
  static constexpr int kSettlingCalls = 1 + kRoutes * kSamples;

  // The route of a shape (kMeasuring while it is being chosen); the values
  // of the decided ones index the routes.
  enum class Choice { kDirect = 0, kTransposed = 1, kPadded = 2, kPaddedTransposed = 3, kMeasuring };

  explicit GemmOrientation(Gemm gemm) : gemm_(std::move(gemm)) {}

  // C = alpha * op(A) op(B) through `gemm`, in the orientation chosen for
  // this shape (measuring it first).
  void Run(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float* c);

  // The choice for the last shape run.
  Choice choice() const { return choice_; }

  // Row-major dst[cols, rows] = src[rows, cols]^T (strided_loop.h's tiles).
  static void Transpose(const float* src, int64_t rows, int64_t cols, float* dst);

 private:
  // The default (m = 0) matches no product worth measuring, so the first
  // call of a real one starts afresh.
  struct Shape {
    bool transpose_a = false, transpose_b = false;
    int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
    bool operator==(const Shape& o) const {
      return transpose_a == o.transpose_a && transpose_b == o.transpose_b && m == o.m &&
             n == o.n && k == o.k && lda == o.lda && ldb == o.ldb;
    }
  };

  static bool Turned(Choice route) {
    return route == Choice::kTransposed || route == Choice::kPaddedTransposed;
  }
  static bool Padded(Choice route) {
    return route == Choice::kPadded || route == Choice::kPaddedTransposed;
  }
  // Runs `route` (not kMeasuring) into c.
  void RunRoute(Choice route, const Shape& s, float alpha, const float* a, const float* b,
                float* c);
  // op(A) op(B) into c, as is or turned.
  void Oriented(bool turned, const Shape& s, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float* c);
  void Decide();

  Gemm gemm_;
  Shape shape_;
  Choice choice_ = Choice::kDirect;  // what a default Shape (m = 0) gets: direct
  int calls_ = 0;  // calls of this shape so far
  std::vector<Choice> candidates_;    // the routes still measured, direct first
  std::vector<std::vector<double>> us_;  // by route: the timed calls
  std::vector<float> scratch_;        // C^T of the transposed routes
};

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_GEMM_ORIENTATION_H_
