// CPU kernels: softmax, log_softmax, their grads, sparse softmax
// cross-entropy and its grad. All subtract the running maximum before exp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
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

Status CheckLabel(KernelContext* ctx, int64_t label, int64_t row, int64_t classes) {
  if (label < 0 || label >= classes) {
    return ctx->Error("label ", label, " at position ", row, " is out of range [0, ", classes, ")");
  }
  return Status::OK();
}

// prob = softmax(prediction); out[n] = logsumexp(prediction[n]) -
// prediction[n, label[n]], computed from the max-shifted values.
template <typename T>
class SparseSoftmaxCrossEntropyKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& prediction = ctx->Input("prediction");
    const Blob& label = ctx->Input("label");
    const int64_t rows = prediction.shape().dim(0);
    const int64_t classes = prediction.shape().dim(1);
    const T* x = prediction.data<T>();
    T* prob = ctx->Output("prob")->data<T>();
    T* out = ctx->Output("out")->data<T>();
    for (int64_t n = 0; n < rows; ++n) {
      const int64_t target = IndexAt(label, n);
      RETURN_IF_ERROR(CheckLabel(ctx, target, n, classes));
      const T* row = x + n * classes;
      T* p = prob + n * classes;
      const T max_value = *std::max_element(row, row + classes);
      T sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += (p[c] = std::exp(row[c] - max_value));
      const T inv = T(1) / sum;
      for (int64_t c = 0; c < classes; ++c) p[c] *= inv;
      out[n] = std::log(sum) - (row[target] - max_value);
    }
    return Status::OK();
  }
};

// dx = dy[n] * (prob - onehot(label)) [+ prob * (dprob - sum(dprob * prob))].
template <typename T>
class SparseSoftmaxCrossEntropyGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& prob_blob = ctx->Input("prob");
    const Blob& label = ctx->Input("label");
    const int64_t rows = prob_blob.shape().dim(0);
    const int64_t classes = prob_blob.shape().dim(1);
    const T* prob = prob_blob.data<T>();
    const T* dy = ctx->Input("dy").data<T>();
    const T* dprob = ctx->HasInput("dprob") ? ctx->Input("dprob").data<T>() : nullptr;
    T* dx = ctx->Output("dx")->data<T>();
    for (int64_t n = 0; n < rows; ++n) {
      const int64_t target = IndexAt(label, n);
      RETURN_IF_ERROR(CheckLabel(ctx, target, n, classes));
      const T* p = prob + n * classes;
      T* g = dx + n * classes;
      for (int64_t c = 0; c < classes; ++c) g[c] = dy[n] * p[c];
      g[target] -= dy[n];
      if (dprob != nullptr) {
        const T* dp = dprob + n * classes;
        T dot = 0;
        for (int64_t c = 0; c < classes; ++c) dot += dp[c] * p[c];
        for (int64_t c = 0; c < classes; ++c) g[c] += p[c] * (dp[c] - dot);
      }
    }
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("sparse_softmax_cross_entropy", SparseSoftmaxCrossEntropyKernel);
REGISTER_NN_CPU_KERNELS("sparse_softmax_cross_entropy_grad", SparseSoftmaxCrossEntropyGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
