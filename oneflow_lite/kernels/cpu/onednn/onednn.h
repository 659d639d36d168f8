// oneDNN-backed float32 CPU compute: GEMM, batched matmul and the three
// passes of conv2d.
//
// These are the fast paths of the float32 CPU kernels (kernels/cpu/math
// matmul, kernels/cpu/nn conv2d and the GEMMs of our own kernels); the
// kernels fall back to their reference code (OpenBLAS, im2col) when
// GetCpuKernelLibrary() is kReference, when Available() is false (builds
// without oneDNN: --config=static), or when oneDNN refuses a shape.
//
// Threads: oneDNN is threaded with OpenMP (Debian's libdnnl2 uses GNU
// OpenMP), whose team size is a setting of the *calling* thread. Every call
// here first sizes the calling thread's team to CpuComputeThreadsSetting()
// (kernels/cpu/cpu_threads.h; the runtime sets it from cpu_threads), so a
// device's stream thread computes with exactly cpu_threads threads: itself
// plus cpu_threads - 1 OpenMP workers of its own. Before any runtime set it
// (0), OpenMP's default (all cores, or OMP_NUM_THREADS) applies. Sgemm
// uses fewer threads for small products (one per 4M multiply-adds): a
// second thread gains little there and, on shared cores, waits long at the
// team's barrier.
//
// Sgemm is stateless and thread-safe. A Conv2d object is used by one thread
// at a time (one kernel instance) and owns its primitives, created once per
// (batch size, thread count) and kept: the planned batch in Create, others
// on first use. A BatchedMatmul likewise keeps one primitive per thread
// count; it splits the batch over threads sooner than Sgemm (one thread per
// 1M multiply-adds): its entries are independent.
#ifndef ONEFLOW_LITE_KERNELS_CPU_ONEDNN_ONEDNN_H_
#define ONEFLOW_LITE_KERNELS_CPU_ONEDNN_ONEDNN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/ops/nn/nn_util.h"

namespace oflite {
namespace onednn {

using nn::Window2d;

// True when this build links oneDNN.
bool Available();

// One line for logs and benchmarks: "oneDNN 2.6.3 (OpenMP)" or
// "oneDNN not built in".
std::string Description();

// Row-major C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C (BLAS
// semantics; m, n, k >= 1). Blocks until done. Internal error naming the
// sizes if oneDNN fails (or Unimplemented without oneDNN).
Status Sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc);

// A batched float32 matmul (oneDNN's matmul primitive): for every index of
// the batch, C = alpha * op(A) op(B) with row-major op(A) [m, k] and op(B)
// [k, n] (A stored [k, m] when transpose_a, B stored [n, k] when
// transpose_b). `a_batch` and `b_batch` have one extent per batch axis of C,
// outermost first, each C's extent or 1 (broadcast); A, B and C are dense
// over their own batch dims. Used by one thread at a time (one kernel
// instance); primitives are built per thread count and kept.
class BatchedMatmul {
 public:
  // Unimplemented when oneDNN is not built in or offers only its reference
  // implementation for the shape (a loop of GEMMs is then faster);
  // InvalidArgument naming the sizes when oneDNN refuses them.
  static StatusOr<std::unique_ptr<BatchedMatmul>> Create(const std::vector<int64_t>& a_batch,
                                                         const std::vector<int64_t>& b_batch,
                                                         bool transpose_a, bool transpose_b,
                                                         int64_t m, int64_t n, int64_t k,
                                                         float alpha);
  virtual ~BatchedMatmul() = default;

  // The buffers are the caller's, read or written only during the call.
  // Blocks.
  virtual Status Run(const float* a, const float* b, float* c) = 0;
};

// Row-major C[m, n] = op(A)[m, k] * op(B)[k, n] + bias[n] broadcast over the
// rows, the bias added in the GEMM's epilogue (oneDNN's matmul primitive):
// one pass over C instead of a GEMM and a bias_add. Threads as for Sgemm.
// Used by one thread at a time; primitives are built per thread count and
// kept.
class GemmBias {
 public:
  // Unimplemented when oneDNN is not built in or offers only its reference
  // implementation; InvalidArgument naming the sizes when it refuses them.
  static StatusOr<std::unique_ptr<GemmBias>> Create(bool transpose_a, bool transpose_b, int64_t m,
                                                    int64_t n, int64_t k);
  virtual ~GemmBias() = default;

  // Dense operands (lda, ldb, ldc their row lengths). Blocks.
  virtual Status Run(const float* a, const float* b, const float* bias, float* c) = 0;
};

// How many conv2d primitives this process has built (every Conv2d, every
// batch size and thread count): tests check that primitives are cached,
// benchmarks that oneDNN is in use. Thread-safe.
int64_t ConvPrimitivesBuilt();

// Which pass of conv2d (x [N,C,H,W], weight [O,C,KH,KW], y [N,O,OH,OW], all
// dense row-major, i.e. NCHW and OIHW):
//   kForward:         Run(n, x, weight, y)
//   kBackwardData:    Run(n, dy, weight, dx)      (dx overwritten)
//   kBackwardWeights: Run(n, x, dy, dw)           (dw overwritten: the sum
//                                                  over the n samples)
enum class ConvPass { kForward, kBackwardData, kBackwardWeights };

class Conv2d {
 public:
  // Builds the primitives for `window` (its batch is the planned one) and
  // `out_channels`. Unimplemented or InvalidArgument (naming the geometry)
  // when oneDNN is not built in or refuses the shape: the caller then uses
  // its reference code.
  static StatusOr<std::unique_ptr<Conv2d>> Create(ConvPass pass, const Window2d& window,
                                                  int64_t out_channels);
  virtual ~Conv2d() = default;

  // Runs the pass over `batch` samples (1 <= batch; other batch sizes than
  // the planned one get primitives of their own on first use). The buffers
  // are the caller's, read or written only during the call. Blocks.
  virtual Status Run(int64_t batch, const float* first, const float* second, float* out) = 0;
};

}  // namespace onednn
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_ONEDNN_ONEDNN_H_
