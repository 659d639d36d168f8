// CPU kernels of the unary math ops (exp, log, sqrt, rsqrt, abs, neg, clamp,
// leaky_relu, silu) and their (dy, x) -> dx gradient ops, float32/float64.
// Plain indexed loops over contiguous memory.
#include <optional>

#include "oneflow_lite/kernels/cpu/math/unary_math_functors.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace math {
namespace {

// y = F(x).
template <typename T, template <typename> class F>
class MapKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    functor_.emplace(ctx.attrs());
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    if (x.elem_count() != y->elem_count()) {
      return ctx->Error("blob sizes disagree: x ", x.shape(), ", y ", y->shape());
    }
    const T* in = x.data<T>();
    T* out = y->data<T>();
    const F<T> f = *functor_;
    for (int64_t i = 0, n = x.elem_count(); i < n; ++i) out[i] = f(in[i]);
    return Status::OK();
  }

 private:
  std::optional<F<T>> functor_;
};

// dx = F(dy, x).
template <typename T, template <typename> class F>
class MapGradKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    functor_.emplace(ctx.attrs());
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& dy = ctx->Input("dy");
    const Blob& x = ctx->Input("x");
    Blob* dx = ctx->Output("dx");
    const int64_t n = dy.elem_count();
    if (x.elem_count() != n || dx->elem_count() != n) {
      return ctx->Error("blob sizes disagree: dy ", dy.shape(), ", x ", x.shape(), ", dx ",
                        dx->shape());
    }
    const T* g = dy.data<T>();
    const T* s = x.data<T>();
    T* out = dx->data<T>();
    const F<T> f = *functor_;
    for (int64_t i = 0; i < n; ++i) out[i] = f(g[i], s[i]);
    return Status::OK();
  }

 private:
  std::optional<F<T>> functor_;
};

#define OFLITE_REGISTER_MAP(op, Kind, Functor)                     \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_FLOAT, Kind<float, Functor>); \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_DOUBLE, Kind<double, Functor>)

OFLITE_REGISTER_MAP("exp", MapKernel, ExpFunctor);
OFLITE_REGISTER_MAP("log", MapKernel, LogFunctor);
OFLITE_REGISTER_MAP("sqrt", MapKernel, SqrtFunctor);
OFLITE_REGISTER_MAP("rsqrt", MapKernel, RsqrtFunctor);
OFLITE_REGISTER_MAP("abs", MapKernel, AbsFunctor);
OFLITE_REGISTER_MAP("neg", MapKernel, NegFunctor);
OFLITE_REGISTER_MAP("clamp", MapKernel, ClampFunctor);
OFLITE_REGISTER_MAP("leaky_relu", MapKernel, LeakyReluFunctor);
OFLITE_REGISTER_MAP("silu", MapKernel, SiluFunctor);
OFLITE_REGISTER_MAP("abs_grad", MapGradKernel, AbsGradFunctor);
OFLITE_REGISTER_MAP("clamp_grad", MapGradKernel, ClampGradFunctor);
OFLITE_REGISTER_MAP("leaky_relu_grad", MapGradKernel, LeakyReluGradFunctor);
OFLITE_REGISTER_MAP("silu_grad", MapGradKernel, SiluGradFunctor);

}  // namespace
}  // namespace math
}  // namespace oflite
