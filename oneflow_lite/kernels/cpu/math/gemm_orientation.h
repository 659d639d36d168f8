// Which way round a kernel's GEMM runs faster.
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
// One object serves one call site of one kernel instance, whose shape
// rarely changes (the planned shapes), from one thread at a time:
//   - the first call of a shape runs both orientations and compares their
//     results bit for bit; if any element differs (the library summed in
//     another order), the shape stays direct, so the choice never changes
//     a result; it also stays direct if the transposed call took more than
//     kHopeless times the direct one (a large square C: the transpose of
//     a 2048 x 2048 C costs more than the GEMM of a batch of 64);
//   - the next 2 * kSamples calls alternate the two, timed;
//   - then the transposed orientation is kept if its fastest call beat the
//     direct one's fastest by more than kMargin, else the direct one.
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
  // Calls of a new shape before its orientation is chosen: the first runs
  // both, the next 2 * kSamples alternate. A timing of the kernel (oflite
  // profile) starts after them, or it measures the choosing.
  static constexpr int kSettlingCalls = 1 + 2 * kSamples;

  enum class Choice { kMeasuring, kDirect, kTransposed };

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

  void Direct(const Shape& s, float alpha, const float* a, const float* b, float* c);
  void Transposed(const Shape& s, float alpha, const float* a, const float* b, float* c);
  void Decide();

  Gemm gemm_;
  Shape shape_;
  Choice choice_ = Choice::kDirect;  // what a default Shape (m = 0) gets: direct
  int calls_ = 0;  // calls of this shape so far
  std::vector<double> direct_us_, transposed_us_;
  std::vector<float> scratch_;
};

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_GEMM_ORIENTATION_H_
