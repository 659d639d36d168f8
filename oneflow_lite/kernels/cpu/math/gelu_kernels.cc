// CPU kernels of gelu and gelu_grad, both forms of attribute `approximate`:
// "none" (erf) and "tanh". float32 runs the vectorized loops of
// kernels/cpu/vec, the same bits on every instruction set: the erf form by a
// polynomial normal CDF (within 8e-8 of the exact one), the tanh form by a
// polynomial exp (relative error about 1e-7). float64 computes the formulas
// with std::erf / std::tanh (the erf grad by GeluGradFunctor,
// elementwise_functors.h) and is the reference the tests compare float32
// with.
//
// Elements are split over the cpu_threads OpenMP team (ParallelElements,
// kernels/cpu/parallel_rows.h); every element is computed on its own, so the
// result does not depend on the thread count.
#include <cmath>
#include <string>

#include "oneflow_lite/kernels/cpu/math/elementwise_functors.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/cpu/vec/vec.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace math {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;

// y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
template <typename T>
void GeluTanh(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T u = T(kSqrt2OverPi) * (v + T(kCubic) * v * v * v);
    y[i] = T(0.5) * v * (T(1) + std::tanh(u));
  }
}
template <>
void GeluTanh<float>(const float* x, float* y, int64_t n) {
  vec::Active().gelu_tanh(x, y, n);
}

// dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) u'), t = tanh(u).
template <typename T>
void GeluTanhGrad(const T* dy, const T* x, T* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T t = std::tanh(T(kSqrt2OverPi) * (v + T(kCubic) * v * v * v));
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kCubic) * v * v);
    dx[i] = dy[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
  }
}
template <>
void GeluTanhGrad<float>(const float* dy, const float* x, float* dx, int64_t n) {
  vec::Active().gelu_tanh_grad(dy, x, dx, n);
}

// y = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)).
template <typename T>
void GeluErf(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(0.5) * x[i] * (T(1) + std::erf(x[i] * T(M_SQRT1_2)));
}
template <>
void GeluErf<float>(const float* x, float* y, int64_t n) {
  vec::Active().gelu_erf(x, y, n);
}

// dx = dy (Phi(x) + x phi(x)).
template <typename T>
void GeluErfGrad(const T* dy, const T* x, T* dx, int64_t n) {
  const GeluGradFunctor<T> f;
  for (int64_t i = 0; i < n; ++i) dx[i] = f(dy[i], x[i]);
}
template <>
void GeluErfGrad<float>(const float* dy, const float* x, float* dx, int64_t n) {
  vec::Active().gelu_erf_grad(dy, x, dx, n);
}

// Reads `approximate` once; inference already rejected other values.
class GeluBase : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    const std::string approximate = ctx.attrs().GetStringOr("approximate", "none");
    if (approximate != "none" && approximate != "tanh") {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): attribute 'approximate' must be \"none\" or \"tanh\", got \"",
                                  approximate, "\"");
    }
    tanh_ = approximate == "tanh";
    return Status::OK();
  }

 protected:
  bool tanh_ = false;
};

template <typename T>
class GeluKernel final : public GeluBase {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    const int64_t n = x.elem_count();
    if (y->elem_count() != n)
      return ctx->Error("blob sizes disagree: x ", x.shape(), ", y ", y->shape());
    const T* in = x.data<T>();
    T* out = y->data<T>();
    const bool tanh_form = tanh_;
    ParallelElements(n, [&](int64_t begin, int64_t end) {
      if (tanh_form) {
        GeluTanh<T>(in + begin, out + begin, end - begin);
      } else {
        GeluErf<T>(in + begin, out + begin, end - begin);
      }
    });
    return Status::OK();
  }
};

template <typename T>
class GeluGradKernel final : public GeluBase {
 public:
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
    const bool tanh_form = tanh_;
    ParallelElements(n, [&](int64_t begin, int64_t end) {
      if (tanh_form) {
        GeluTanhGrad<T>(g + begin, s + begin, out + begin, end - begin);
      } else {
        GeluErfGrad<T>(g + begin, s + begin, out + begin, end - begin);
      }
    });
    return Status::OK();
  }
};

// gelu_and_derivative (ops/math/fused_ops.cc, the compiler's fusion of a
// gelu and its gradient): y as GeluErf, dydx such that mul(dy, dydx) is
// GeluErfGrad's dx bit for bit (float32: the vec table's
// gelu_erf_and_derivative; float64: GeluGradFunctor's cdf + x pdf).
template <typename T>
void GeluErfAndDerivative(const T* x, T* y, T* d, int64_t n) {
  GeluErf<T>(x, y, n);
  // 1 * (cdf + x pdf): the derivative's bits exactly.
  const GeluGradFunctor<T> f;
  for (int64_t i = 0; i < n; ++i) d[i] = f(T(1), x[i]);
}
template <>
void GeluErfAndDerivative<float>(const float* x, float* y, float* d, int64_t n) {
  vec::Active().gelu_erf_and_derivative(x, y, d, n);
}

template <typename T>
class GeluAndDerivativeKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    Blob* dydx = ctx->Output("dydx");
    const int64_t n = x.elem_count();
    if (y->elem_count() != n || dydx->elem_count() != n) {
      return ctx->Error("blob sizes disagree: x ", x.shape(), ", y ", y->shape(), ", dydx ",
                        dydx->shape());
    }
    const T* in = x.data<T>();
    T* out = y->data<T>();
    T* derivative = dydx->data<T>();
    ParallelElements(n, [&](int64_t begin, int64_t end) {
      GeluErfAndDerivative<T>(in + begin, out + begin, derivative + begin, end - begin);
    });
    return Status::OK();
  }
};

REGISTER_KERNEL("gelu_and_derivative", DEVICE_CPU, DT_FLOAT, GeluAndDerivativeKernel<float>);
REGISTER_KERNEL("gelu_and_derivative", DEVICE_CPU, DT_DOUBLE, GeluAndDerivativeKernel<double>);
REGISTER_KERNEL("gelu", DEVICE_CPU, DT_FLOAT, GeluKernel<float>);
REGISTER_KERNEL("gelu", DEVICE_CPU, DT_DOUBLE, GeluKernel<double>);
REGISTER_KERNEL("gelu_grad", DEVICE_CPU, DT_FLOAT, GeluGradKernel<float>);
REGISTER_KERNEL("gelu_grad", DEVICE_CPU, DT_DOUBLE, GeluGradKernel<double>);

}  // namespace
}  // namespace math
}  // namespace oflite
