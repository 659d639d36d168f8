// CPU pooling kernels (NCHW). Windows are clipped to the input: max pooling
// ignores padded positions, average pooling divides by the number of
// in-bounds elements. Ties in max pooling go to the first maximum (row-major
// within the window), in the forward and the backward pass alike.
// Max pooling with 2x2 windows at stride 2 and no padding (every window in
// bounds) takes a direct path with the same comparisons in the same order.
// Planes (one image's channel) are split over threads
// (kernels/cpu/parallel_rows.h); each plane is computed alone, so the thread
// count changes no bit.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/nn/nn_util.h"

namespace oflite {
namespace nn {
namespace {

// The in-bounds part of one output position's window: rows [h0, h1),
// cols [w0, w1).
struct Span {
  int64_t h0, h1, w0, w1;
  int64_t Count() const { return std::max<int64_t>(0, (h1 - h0) * (w1 - w0)); }
};

Span WindowAt(const Window2d& w, int64_t oh, int64_t ow) {
  const int64_t hs = oh * w.stride_h - w.pad_h;
  const int64_t ws = ow * w.stride_w - w.pad_w;
  return Span{std::max<int64_t>(hs, 0), std::min(hs + w.kernel_h, w.height),
              std::max<int64_t>(ws, 0), std::min(ws + w.kernel_w, w.width)};
}

// Offset (within the plane) of the first maximum of a window; -1 if empty.
template <typename T>
int64_t ArgMaxIn(const Window2d& w, const T* plane, const Span& s) {
  int64_t best = -1;
  for (int64_t h = s.h0; h < s.h1; ++h) {
    for (int64_t c = s.w0; c < s.w1; ++c) {
      const int64_t k = h * w.width + c;
      if (best < 0 || plane[k] > plane[best]) best = k;
    }
  }
  return best;
}

// True when every window is an in-bounds 2x2 block at stride 2.
bool IsPlain2x2(const Window2d& w) {
  return w.kernel_h == 2 && w.kernel_w == 2 && w.stride_h == 2 && w.stride_w == 2 &&
         w.pad_h == 0 && w.pad_w == 0 && w.dilation_h == 1 && w.dilation_w == 1 &&
         2 * w.out_h <= w.height && 2 * w.out_w <= w.width;
}

// The 2x2 windows of one plane, without branches on the data: the running
// maximum is a select (a b / c d order, first maximum kept on ties and NaN,
// as ArgMaxIn), so the loops do not mispredict on random inputs.
template <typename T>
void Max2x2Plane(const Window2d& w, const T* plane, T* out) {
  for (int64_t oh = 0; oh < w.out_h; ++oh) {
    const T* top = plane + 2 * oh * w.width;
    const T* bottom = top + w.width;
    for (int64_t ow = 0; ow < w.out_w; ++ow) {
      T m = top[2 * ow];
      m = top[2 * ow + 1] > m ? top[2 * ow + 1] : m;
      m = bottom[2 * ow] > m ? bottom[2 * ow] : m;
      out[oh * w.out_w + ow] = bottom[2 * ow + 1] > m ? bottom[2 * ow + 1] : m;
    }
  }
}

// `value` if `keep`, else +0, through an integer mask: no branch for the
// compiler to bring back (a ?: on random data mispredicts half the time).
template <typename T>
T KeepIf(bool keep, T value) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits bits;
  std::memcpy(&bits, &value, sizeof(T));
  bits &= Bits(0) - static_cast<Bits>(keep);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// dy of each 2x2 window to its first maximum, 0 to the window's other three
// elements (windows do not overlap; elements outside every window are the
// caller's to zero). Bitwise & on the comparisons: no branches.
template <typename T>
void Max2x2GradPlane(const Window2d& w, const T* plane, const T* dy, T* grad) {
  for (int64_t oh = 0; oh < w.out_h; ++oh) {
    const int64_t top = 2 * oh * w.width, bottom = top + w.width;
    for (int64_t ow = 0; ow < w.out_w; ++ow) {
      const T a = plane[top + 2 * ow], b = plane[top + 2 * ow + 1];
      const T c = plane[bottom + 2 * ow], d = plane[bottom + 2 * ow + 1];
      const bool b_wins = b > a;
      const T ab = b_wins ? b : a;
      const bool c_wins = c > ab;
      const T abc = c_wins ? c : ab;
      const bool d_wins = d > abc;
      const T g = dy[oh * w.out_w + ow];
      grad[top + 2 * ow] = KeepIf(!b_wins & !c_wins & !d_wins, g);
      grad[top + 2 * ow + 1] = KeepIf(b_wins & !c_wins & !d_wins, g);
      grad[bottom + 2 * ow] = KeepIf(c_wins & !d_wins, g);
      grad[bottom + 2 * ow + 1] = KeepIf(d_wins, g);
    }
  }
}

// The pooling of planes [first, last) (x, y: whole blobs).
template <typename T>
void MaxPoolPlanes(const Window2d& w, const T* x, T* y, int64_t first, int64_t last) {
  for (int64_t p = first; p < last; ++p) {
    const T* plane = x + p * w.InSpatial();
    if (IsPlain2x2(w)) {
      Max2x2Plane(w, plane, y + p * w.OutSpatial());
      continue;
    }
    for (int64_t oh = 0; oh < w.out_h; ++oh) {
      for (int64_t ow = 0; ow < w.out_w; ++ow) {
        const int64_t best = ArgMaxIn(w, plane, WindowAt(w, oh, ow));
        y[(p * w.out_h + oh) * w.out_w + ow] = best < 0 ? T(0) : plane[best];
      }
    }
  }
}

// dx of planes [first, last) at each window's first maximum (recomputed
// from x) += dy, after zeroing them unless `covered` (the 2x2 path then
// writes every element).
template <typename T>
void MaxPoolGradPlanes(const Window2d& w, const T* x, const T* dy, T* dx, bool covered,
                       int64_t first, int64_t last) {
  if (!covered) std::fill(dx + first * w.InSpatial(), dx + last * w.InSpatial(), T(0));
  for (int64_t p = first; p < last; ++p) {
    const T* plane = x + p * w.InSpatial();
    T* grad = dx + p * w.InSpatial();
    if (IsPlain2x2(w)) {
      Max2x2GradPlane(w, plane, dy + p * w.OutSpatial(), grad);
      continue;
    }
    for (int64_t oh = 0; oh < w.out_h; ++oh) {
      for (int64_t ow = 0; ow < w.out_w; ++ow) {
        const int64_t best = ArgMaxIn(w, plane, WindowAt(w, oh, ow));
        if (best >= 0) grad[best] += dy[(p * w.out_h + oh) * w.out_w + ow];
      }
    }
  }
}

template <typename T>
void AvgPoolPlanes(const Window2d& w, const T* x, T* y, int64_t first, int64_t last) {
  for (int64_t p = first; p < last; ++p) {
    const T* plane = x + p * w.InSpatial();
    for (int64_t oh = 0; oh < w.out_h; ++oh) {
      for (int64_t ow = 0; ow < w.out_w; ++ow) {
        const Span s = WindowAt(w, oh, ow);
        T sum = 0;
        for (int64_t h = s.h0; h < s.h1; ++h) {
          for (int64_t c = s.w0; c < s.w1; ++c) sum += plane[h * w.width + c];
        }
        y[(p * w.out_h + oh) * w.out_w + ow] = s.Count() > 0 ? sum / T(s.Count()) : T(0);
      }
    }
  }
}

template <typename T>
void AvgPoolGradPlanes(const Window2d& w, const T* dy, T* dx, int64_t first, int64_t last) {
  std::fill(dx + first * w.InSpatial(), dx + last * w.InSpatial(), T(0));
  for (int64_t p = first; p < last; ++p) {
    T* grad = dx + p * w.InSpatial();
    for (int64_t oh = 0; oh < w.out_h; ++oh) {
      for (int64_t ow = 0; ow < w.out_w; ++ow) {
        const Span s = WindowAt(w, oh, ow);
        if (s.Count() == 0) continue;
        const T share = dy[(p * w.out_h + oh) * w.out_w + ow] / T(s.Count());
        for (int64_t h = s.h0; h < s.h1; ++h) {
          for (int64_t c = s.w0; c < s.w1; ++c) grad[h * w.width + c] += share;
        }
      }
    }
  }
}

class PoolKernelBase : public Kernel {
 protected:
  Status InitWindow(const KernelInitContext& ctx, const Shape& image) {
    auto window = MakePoolWindow(ctx.attrs(), image);
    if (!window.ok()) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): ", window.status().message());
    }
    window_ = *window;
    return Status::OK();
  }

  // fn(first, last) over the planes (N * C of the blob's actual batch) of
  // `image`, on threads.
  template <typename Fn>
  void ForPlanes(const Shape& image, const Fn& fn) const {
    const Window2d& w = window_;
    const int64_t work = std::max(w.InSpatial(), w.OutSpatial() * w.kernel_h * w.kernel_w);
    ParallelRows(image.dim(0) * image.dim(1), work, fn);
  }

  Window2d window_;
};

template <typename T>
class MaxPoolKernel final : public PoolKernelBase {
 public:
  Status Init(const KernelInitContext& ctx) override {
    return InitWindow(ctx, ctx.Input("x").shape);
  }
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const T* in = x.data<T>();
    T* y = ctx->Output("y")->data<T>();
    ForPlanes(x.shape(), [&](int64_t first, int64_t last) {
      MaxPoolPlanes(window_, in, y, first, last);
    });
    return Status::OK();
  }
};

template <typename T>
class MaxPoolGradKernel final : public PoolKernelBase {
 public:
  Status Init(const KernelInitContext& ctx) override {
    return InitWindow(ctx, ctx.Input("x").shape);
  }
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const T* in = x.data<T>();
    const T* dy = ctx->Input("dy").data<T>();
    T* dx = ctx->Output("dx")->data<T>();
    const Window2d& w = window_;
    const bool covered = IsPlain2x2(w) && 2 * w.out_h == w.height && 2 * w.out_w == w.width;
    ForPlanes(x.shape(), [&](int64_t first, int64_t last) {
      MaxPoolGradPlanes(window_, in, dy, dx, covered, first, last);
    });
    return Status::OK();
  }
};

template <typename T>
class AvgPoolKernel final : public PoolKernelBase {
 public:
  Status Init(const KernelInitContext& ctx) override {
    return InitWindow(ctx, ctx.Input("x").shape);
  }
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const T* in = x.data<T>();
    T* y = ctx->Output("y")->data<T>();
    ForPlanes(x.shape(), [&](int64_t first, int64_t last) {
      AvgPoolPlanes(window_, in, y, first, last);
    });
    return Status::OK();
  }
};

template <typename T>
class AvgPoolGradKernel final : public PoolKernelBase {
 public:
  Status Init(const KernelInitContext& ctx) override {
    return InitWindow(ctx, ctx.Input("like").shape);
  }
  Status Forward(KernelContext* ctx) override {
    const T* dy = ctx->Input("dy").data<T>();
    Blob* dx = ctx->Output("dx");
    T* out = dx->data<T>();
    ForPlanes(dx->shape(), [&](int64_t first, int64_t last) {
      AvgPoolGradPlanes(window_, dy, out, first, last);
    });
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("max_pool2d", MaxPoolKernel);
REGISTER_NN_CPU_KERNELS("max_pool2d_grad", MaxPoolGradKernel);
REGISTER_NN_CPU_KERNELS("avg_pool2d", AvgPoolKernel);
REGISTER_NN_CPU_KERNELS("avg_pool2d_grad", AvgPoolGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
