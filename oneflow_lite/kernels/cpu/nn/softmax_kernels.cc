// CPU kernels: softmax, log_softmax, causal_softmax and their grads (sparse
// softmax cross-entropy: cross_entropy_kernels.cc). All subtract the running
// maximum before exp.
//
// causal_softmax rows are independent: they are split over threads
// (kernels/cpu/parallel_rows.h), and float32 rows run 16-lane vector code
// (float_lanes.h) cloned per instruction set, the same bits on each.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cpu/nn/float_lanes.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
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

// y[0, n) = softmax(scale * x[0, n)), y[n, keys) = 0.
template <typename T>
void CausalSoftmaxRow(const T* x, T* y, int64_t n, int64_t keys, T scale) {
  if (n > 0) {
    T max_value = -std::numeric_limits<T>::infinity();
    for (int64_t d = 0; d < n; ++d) max_value = std::max(max_value, scale * x[d]);
    T sum = 0;
    for (int64_t d = 0; d < n; ++d) sum += (y[d] = std::exp(scale * x[d] - max_value));
    const T inverse = T(1) / sum;
    for (int64_t d = 0; d < n; ++d) y[d] *= inverse;
  }
  std::fill(y + n, y + keys, T(0));
}

// float32: 16-lane blocks (float_lanes.h). The last n % 16 values form one
// more block, padded with -inf (no effect on the maximum, exp 0 in the
// sum); it is read (and written, with zeros past n) as a whole block when
// the row has 16 values there, as rows of a causal mask mostly do.
OFLITE_CPU_CLONES void CausalSoftmaxRowFloat(
    const float* __restrict x, float* __restrict y, int64_t n, int64_t keys, float scale) {
  using namespace lanes;  // NOLINT
  const int64_t full = n / kLanes * kLanes, rest = n - full;
  const bool whole_tail = full + kLanes <= keys;
  const Floats minus_inf = Splat(-std::numeric_limits<float>::infinity());
  Floats tail = minus_inf;
  if (rest > 0) {
    const Floats v = whole_tail ? Load(x + full) : LoadPartial(x + full, rest, 0.0f);
    tail = Select(FirstLanes(rest), v * scale, minus_inf);
  }
  Floats m = tail;
  for (int64_t i = 0; i < full; i += kLanes) {
    const Floats v = Load(x + i) * scale;
    m = Select(Greater(v, m), v, m);
  }
  const Floats shift = Splat(LaneMax(m));
  Floats sums = Splat(0.0f);
  if (rest > 0) sums = tail = ExpNonPositive(tail - shift);  // 0 in the padding
  for (int64_t i = 0; i < full; i += kLanes) {
    const Floats e = ExpNonPositive(Load(x + i) * scale - shift);
    Store(y + i, e);
    sums += e;
  }
  const Floats inverse = Splat(1.0f / LaneSum(sums));
  for (int64_t i = 0; i < full; i += kLanes) Store(y + i, Load(y + i) * inverse);
  int64_t zeros_from = n;
  if (rest > 0 && whole_tail) {
    Store(y + full, tail * inverse);
    zeros_from = full + kLanes;
  } else if (rest > 0) {
    StorePartial(y + full, tail * inverse, rest);
  }
  if (keys > zeros_from) std::memset(y + zeros_from, 0, (keys - zeros_from) * sizeof(float));
}

template <>
void CausalSoftmaxRow<float>(const float* x, float* y, int64_t n, int64_t keys, float scale) {
  CausalSoftmaxRowFloat(x, y, n, keys, scale);
}

// dx[0, n) = scale * y * (dy - sum(dy * y)), dx[n, keys) = 0.
template <typename T>
void CausalSoftmaxGradRow(const T* dy, const T* y, T* dx, int64_t n, int64_t keys, T scale) {
  T dot = 0;
  for (int64_t d = 0; d < n; ++d) dot += dy[d] * y[d];
  for (int64_t d = 0; d < n; ++d) dx[d] = scale * y[d] * (dy[d] - dot);
  std::fill(dx + n, dx + keys, T(0));
}

// float32: as CausalSoftmaxRowFloat, the tail block padded with zeros.
OFLITE_CPU_CLONES void CausalSoftmaxGradRowFloat(
    const float* __restrict dy, const float* __restrict y, float* __restrict dx, int64_t n,
    int64_t keys, float scale) {
  using namespace lanes;  // NOLINT
  const int64_t full = n / kLanes * kLanes, rest = n - full;
  const bool whole_tail = full + kLanes <= keys;
  Floats dy_tail = Splat(0.0f), y_tail = Splat(0.0f);
  if (rest > 0 && whole_tail) {
    dy_tail = LoadMasked(dy + full, rest, 0.0f);
    y_tail = LoadMasked(y + full, rest, 0.0f);
  } else if (rest > 0) {
    dy_tail = LoadPartial(dy + full, rest, 0.0f);
    y_tail = LoadPartial(y + full, rest, 0.0f);
  }
  Floats dots = dy_tail * y_tail;
  for (int64_t i = 0; i < full; i += kLanes) dots += Load(dy + i) * Load(y + i);
  const Floats dot = Splat(LaneSum(dots));
  for (int64_t i = 0; i < full; i += kLanes) {
    Store(dx + i, scale * Load(y + i) * (Load(dy + i) - dot));
  }
  int64_t zeros_from = n;
  if (rest > 0) {
    const Floats tail = Select(FirstLanes(rest), scale * y_tail * (dy_tail - dot), Splat(0.0f));
    if (whole_tail) {
      Store(dx + full, tail);
      zeros_from = full + kLanes;
    } else {
      StorePartial(dx + full, tail, rest);
    }
  }
  if (keys > zeros_from) std::memset(dx + zeros_from, 0, (keys - zeros_from) * sizeof(float));
}

template <>
void CausalSoftmaxGradRow<float>(const float* dy, const float* y, float* dx, int64_t n,
                                 int64_t keys, float scale) {
  CausalSoftmaxGradRowFloat(dy, y, dx, n, keys, scale);
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
    const T scale = static_cast<T>(scale_);
    ParallelRows(l.rows, l.keys, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t offset = r * l.keys;
        CausalSoftmaxRow<T>(in + offset, out + offset, l.Visible(r), l.keys, scale);
      }
    });
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
    const T scale = static_cast<T>(scale_);
    ParallelRows(l.rows, l.keys, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t offset = r * l.keys;
        CausalSoftmaxGradRow<T>(dy + offset, y + offset, dx + offset, l.Visible(r), l.keys, scale);
      }
    });
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("causal_softmax", CausalSoftmaxKernel);
REGISTER_NN_CPU_KERNELS("causal_softmax_grad", CausalSoftmaxGradKernel);

// sparse_softmax_cross_entropy and its grad: cross_entropy_kernels.cc.

}  // namespace
}  // namespace nn
}  // namespace oflite
