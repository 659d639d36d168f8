// CPU adaptive_avg_pool2d and its grad (float32/float64). Bins from
// oneflow_lite/ops/nn/adaptive_pool.h; extents from the bound blobs, so
// batch/channel shards run unchanged. Planes are split over threads
// (kernels/cpu/parallel_rows.h), each computed alone: the thread count
// changes no bit.
#include <algorithm>
#include <vector>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/nn/adaptive_pool.h"

namespace oflite {
namespace nn {
namespace {

struct PoolDims {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
};

// x [N, C, H, W] and y [N, C, OH, OW] as bound.
StatusOr<PoolDims> DimsOf(KernelContext* ctx, const Shape& x, const Shape& y) {
  if (x.rank() != 4 || y.rank() != 4 || x.dim(0) != y.dim(0) || x.dim(1) != y.dim(1) ||
      x.dim(2) < 1 || x.dim(3) < 1) {
    return ctx->Error("blob shapes disagree: input ", x, ", pooled ", y);
  }
  return PoolDims{x.dim(0) * x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3)};
}

// Calls fn(input offset in the plane, output offset in the plane, 1 / bin
// size) for every (input, output) pair of one plane.
template <typename Fn>
void ForBins(const PoolDims& d, Fn&& fn) {
  for (int64_t i = 0; i < d.oh; ++i) {
    const int64_t h0 = AdaptiveBinStart(i, d.h, d.oh), h1 = AdaptiveBinEnd(i, d.h, d.oh);
    for (int64_t j = 0; j < d.ow; ++j) {
      const int64_t w0 = AdaptiveBinStart(j, d.w, d.ow), w1 = AdaptiveBinEnd(j, d.w, d.ow);
      const double scale = 1.0 / static_cast<double>((h1 - h0) * (w1 - w0));
      for (int64_t r = h0; r < h1; ++r) {
        for (int64_t c = w0; c < w1; ++c) fn(r * d.w + c, i * d.ow + j, scale);
      }
    }
  }
}

// Elements of work per plane: every input element is read (bins may
// overlap, but by at most one row or column), every output written.
int64_t PlaneWork(const PoolDims& d) { return d.h * d.w + d.oh * d.ow; }

template <typename T>
class AdaptiveAvgPoolKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    ASSIGN_OR_RETURN(PoolDims d, DimsOf(ctx, x.shape(), y->shape()));
    ParallelRows(d.planes, PlaneWork(d), [&](int64_t first, int64_t last) {
      std::vector<double> acc(d.oh * d.ow);
      for (int64_t p = first; p < last; ++p) {
        const T* in = x.data<T>() + p * d.h * d.w;
        std::fill(acc.begin(), acc.end(), 0.0);
        ForBins(d, [&](int64_t src, int64_t dst, double scale) { acc[dst] += in[src] * scale; });
        T* out = y->data<T>() + p * d.oh * d.ow;
        for (size_t k = 0; k < acc.size(); ++k) out[k] = static_cast<T>(acc[k]);
      }
    });
    return Status::OK();
  }
};

template <typename T>
class AdaptiveAvgPoolGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& dy = ctx->Input("dy");
    Blob* dx = ctx->Output("dx");
    ASSIGN_OR_RETURN(PoolDims d, DimsOf(ctx, dx->shape(), dy.shape()));
    ParallelRows(d.planes, PlaneWork(d), [&](int64_t first, int64_t last) {
      std::vector<double> acc(d.h * d.w);
      for (int64_t p = first; p < last; ++p) {
        const T* g = dy.data<T>() + p * d.oh * d.ow;
        std::fill(acc.begin(), acc.end(), 0.0);
        ForBins(d, [&](int64_t src, int64_t dst, double scale) { acc[src] += g[dst] * scale; });
        T* out = dx->data<T>() + p * d.h * d.w;
        for (size_t k = 0; k < acc.size(); ++k) out[k] = static_cast<T>(acc[k]);
      }
    });
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("adaptive_avg_pool2d", AdaptiveAvgPoolKernel);
REGISTER_NN_CPU_KERNELS("adaptive_avg_pool2d_grad", AdaptiveAvgPoolGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
