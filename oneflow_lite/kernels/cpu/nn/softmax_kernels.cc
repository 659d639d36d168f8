// CPU kernels: softmax, log_softmax, causal_softmax and their grads (sparse
// softmax cross-entropy: cross_entropy_kernels.cc). All subtract the running
// maximum before exp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cpu/vec/vec.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

// Visits every softmax "row": `size` elements `inner` apart, starting at
// `base` for each (outer, inner) pair.
template <typename Fn>
void ForEachRow(const AxisLayout& l, Fn fn) {
  for (int64_t o = 0; o < l.outer; ++o) {
    for (int64_t i = 0; i < l.inner; ++i) fn(o * l.size * l.inner + i);
  }
}

// Writes softmax (or log_softmax) of one strided row of x into y.
template <typename T>
void SoftmaxRow(const T* x, T* y, int64_t size, int64_t stride, bool log) {
  T max_value = -std::numeric_limits<T>::infinity();
  for (int64_t d = 0; d < size; ++d) max_value = std::max(max_value, x[d * stride]);
  T sum = 0;
  for (int64_t d = 0; d < size; ++d) {
    const T e = std::exp(x[d * stride] - max_value);
    y[d * stride] = e;
    sum += e;
  }
  if (log) {
    const T log_sum = std::log(sum);
    for (int64_t d = 0; d < size; ++d) y[d * stride] = x[d * stride] - max_value - log_sum;
  } else {
    const T inv = T(1) / sum;
    for (int64_t d = 0; d < size; ++d) y[d * stride] *= inv;
  }
}

class AxisKernel : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    axis_ = ctx.attrs().GetIntOr("axis", -1);
    auto layout = MakeAxisLayout(ctx.outputs.begin()->second.at(0).shape, axis_);
    if (!layout.ok()) {
      return InvalidArgumentError("op '", ctx.op->name(), "': ", layout.status().message());
    }
    return Status::OK();
  }

 protected:
  StatusOr<AxisLayout> Layout(KernelContext* ctx, const Shape& shape) const {
    auto layout = MakeAxisLayout(shape, axis_);
    if (!layout.ok()) return ctx->Error(layout.status().message());
    return layout;
  }

 private:
  int64_t axis_ = -1;
};

template <typename T, bool kLog>
class SoftmaxKernel final : public AxisKernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    ASSIGN_OR_RETURN(AxisLayout l, Layout(ctx, x.shape()));
    const T* in = x.data<T>();
    T* out = y->data<T>();
    ForEachRow(l, [&](int64_t base) { SoftmaxRow(in + base, out + base, l.size, l.inner, kLog); });
    return Status::OK();
  }
};

// softmax_grad: dx = y * (dy - sum(dy * y)).
// log_softmax_grad: dx = dy - exp(y) * sum(dy).
template <typename T, bool kLog>
class SoftmaxGradKernel final : public AxisKernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& dy_blob = ctx->Input("dy");
    ASSIGN_OR_RETURN(AxisLayout l, Layout(ctx, dy_blob.shape()));
    const T* dy = dy_blob.data<T>();
    const T* y = ctx->Input("y").data<T>();
    T* dx = ctx->Output("dx")->data<T>();
    const int64_t s = l.inner;
    ForEachRow(l, [&](int64_t base) {
      T dot = 0;
      for (int64_t d = 0; d < l.size; ++d) {
        const int64_t k = base + d * s;
        dot += kLog ? dy[k] : dy[k] * y[k];
      }
      for (int64_t d = 0; d < l.size; ++d) {
        const int64_t k = base + d * s;
        dx[k] = kLog ? dy[k] - std::exp(y[k]) * dot : y[k] * (dy[k] - dot);
      }
    });
    return Status::OK();
  }
};

template <typename T>
using Softmax = SoftmaxKernel<T, false>;
template <typename T>
using LogSoftmax = SoftmaxKernel<T, true>;
template <typename T>
using SoftmaxGrad = SoftmaxGradKernel<T, false>;
template <typename T>
using LogSoftmaxGrad = SoftmaxGradKernel<T, true>;

REGISTER_NN_CPU_KERNELS("softmax", Softmax);
REGISTER_NN_CPU_KERNELS("log_softmax", LogSoftmax);
REGISTER_NN_CPU_KERNELS("softmax_grad", SoftmaxGrad);
REGISTER_NN_CPU_KERNELS("log_softmax_grad", LogSoftmaxGrad);

// ---- causal_softmax over [..., Tq, Tk] (docs/ops.md) ----

// The rows of a [..., Tq, Tk] tensor; row r is query r % Tq.
struct CausalRows {
  int64_t rows = 0, queries = 0, keys = 0;
  // The keys query `row` sees: the first min(Tk, max(0, q + 1 + Tk - Tq)).
  int64_t Visible(int64_t row) const {
    return std::min(keys, std::max<int64_t>(0, row % queries + 1 + keys - queries));
  }
};

StatusOr<CausalRows> MakeCausalRows(KernelContext* ctx, const Shape& shape) {
  if (shape.rank() < 2) return ctx->Error("needs rank >= 2 [..., queries, keys], got ", shape);
  CausalRows l;
  l.queries = shape.dim(shape.rank() - 2);
  l.keys = shape.dim(shape.rank() - 1);
  l.rows = shape.Count(0, shape.rank() - 1);
  return l;
}

// y[0, n) = softmax(scale * x[0, n)); float32 runs the vectorized loop.
template <typename T>
void ScaledSoftmaxRow(const T* x, T* y, int64_t n, T scale) {
  T max_value = -std::numeric_limits<T>::infinity();
  for (int64_t d = 0; d < n; ++d) max_value = std::max(max_value, scale * x[d]);
  T sum = 0;
  for (int64_t d = 0; d < n; ++d) sum += (y[d] = std::exp(scale * x[d] - max_value));
  const T inverse = T(1) / sum;
  for (int64_t d = 0; d < n; ++d) y[d] *= inverse;
}
template <>
void ScaledSoftmaxRow<float>(const float* x, float* y, int64_t n, float scale) {
  vec::Active().softmax_row(x, y, n, scale);
}

// dx[0, n) = scale * y * (dy - sum(dy * y)).
template <typename T>
void ScaledSoftmaxGradRow(const T* dy, const T* y, T* dx, int64_t n, T scale) {
  T dot = 0;
  for (int64_t d = 0; d < n; ++d) dot += dy[d] * y[d];
  for (int64_t d = 0; d < n; ++d) dx[d] = scale * y[d] * (dy[d] - dot);
}
template <>
void ScaledSoftmaxGradRow<float>(const float* dy, const float* y, float* dx, int64_t n,
                                 float scale) {
  vec::Active().softmax_grad_row(dy, y, dx, n, scale);
}

class CausalKernel : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    scale_ = ctx.attrs().GetFloatOr("scale", 1.0);
    return Status::OK();
  }

 protected:
  double scale_ = 1.0;
};

// Reads only the visible prefix of each row and writes zeros after it.
template <typename T>
class CausalSoftmaxKernel final : public CausalKernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    if (y->shape() != x.shape()) return ctx->Error("x ", x.shape(), " vs y ", y->shape());
    ASSIGN_OR_RETURN(CausalRows l, MakeCausalRows(ctx, x.shape()));
    const T* in = x.data<T>();
    T* out = y->data<T>();
    for (int64_t r = 0; r < l.rows; ++r) {
      const int64_t visible = l.Visible(r);
      T* row = out + r * l.keys;
      if (visible > 0) ScaledSoftmaxRow<T>(in + r * l.keys, row, visible, static_cast<T>(scale_));
      std::fill(row + visible, row + l.keys, T(0));
    }
    return Status::OK();
  }
};

template <typename T>
class CausalSoftmaxGradKernel final : public CausalKernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& dy_blob = ctx->Input("dy");
    const Blob& y_blob = ctx->Input("y");
    Blob* dx_blob = ctx->Output("dx");
    if (y_blob.shape() != dy_blob.shape() || dx_blob->shape() != dy_blob.shape()) {
      return ctx->Error("dy ", dy_blob.shape(), ", y ", y_blob.shape(), " and dx ",
                        dx_blob->shape(), " must match");
    }
    ASSIGN_OR_RETURN(CausalRows l, MakeCausalRows(ctx, dy_blob.shape()));
    const T* dy = dy_blob.data<T>();
    const T* y = y_blob.data<T>();
    T* dx = dx_blob->data<T>();
    for (int64_t r = 0; r < l.rows; ++r) {
      const int64_t visible = l.Visible(r), base = r * l.keys;
      ScaledSoftmaxGradRow<T>(dy + base, y + base, dx + base, visible, static_cast<T>(scale_));
      std::fill(dx + base + visible, dx + base + l.keys, T(0));
    }
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("causal_softmax", CausalSoftmaxKernel);
REGISTER_NN_CPU_KERNELS("causal_softmax_grad", CausalSoftmaxGradKernel);

// sparse_softmax_cross_entropy and its grad: cross_entropy_kernels.cc.

}  // namespace
}  // namespace nn
}  // namespace oflite
