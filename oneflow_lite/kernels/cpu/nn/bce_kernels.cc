// CPU binary_cross_entropy_with_logits and its grad (float32/float64):
// out = max(x, 0) - x t + log1p(exp(-|x|)); dx = dy (sigmoid(x) - t),
// dtarget = -dy x.
#include <cmath>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

Status CheckSizes(KernelContext* ctx, std::initializer_list<const Blob*> blobs) {
  const int64_t n = (*blobs.begin())->elem_count();
  for (const Blob* b : blobs) {
    if (b->elem_count() != n) return ctx->Error("blob sizes disagree: ", b->shape(), " vs ", n);
  }
  return Status::OK();
}

template <typename T>
class BceKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const Blob& t = ctx->Input("target");
    Blob* out = ctx->Output("out");
    RETURN_IF_ERROR(CheckSizes(ctx, {&x, &t, out}));
    const T* a = x.data<T>();
    const T* b = t.data<T>();
    T* o = out->data<T>();
    for (int64_t i = 0, n = x.elem_count(); i < n; ++i) {
      o[i] = std::max(a[i], T(0)) - a[i] * b[i] + std::log1p(std::exp(-std::abs(a[i])));
    }
    return Status::OK();
  }
};

template <typename T>
class BceGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& dy = ctx->Input("dy");
    const Blob& x = ctx->Input("x");
    const Blob& t = ctx->Input("target");
    Blob* dx = ctx->Output("dx");
    Blob* dt = ctx->Output("dtarget");
    RETURN_IF_ERROR(CheckSizes(ctx, {&dy, &x, &t, dx, dt}));
    const T* g = dy.data<T>();
    const T* a = x.data<T>();
    const T* b = t.data<T>();
    T* o = dx->data<T>();
    T* ot = dt->data<T>();
    for (int64_t i = 0, n = x.elem_count(); i < n; ++i) {
      o[i] = g[i] * (T(1) / (T(1) + std::exp(-a[i])) - b[i]);
      ot[i] = -g[i] * a[i];
    }
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("binary_cross_entropy_with_logits", BceKernel);
REGISTER_NN_CPU_KERNELS("binary_cross_entropy_with_logits_grad", BceGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
