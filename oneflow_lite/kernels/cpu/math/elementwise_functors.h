// Scalar functors of the elementwise math ops, shared by the CPU kernels
// (and usable from CUDA kernels: they are plain inline arithmetic).
//
// Unary functors map x -> y; gradient functors map (dy, saved) -> dx, where
// `saved` is the forward output y (relu, sigmoid, tanh) or input x (gelu).
// Functors taking attributes read them at construction (kernel Init).
#ifndef ONEFLOW_LITE_KERNELS_CPU_MATH_ELEMENTWISE_FUNCTORS_H_
#define ONEFLOW_LITE_KERNELS_CPU_MATH_ELEMENTWISE_FUNCTORS_H_

#include <cmath>

#include "oneflow_lite/common/attr.h"

namespace oflite {
namespace math {

template <typename T>
struct ReluFunctor {
  explicit ReluFunctor(const AttrView&) {}
  T operator()(T x) const { return x > T(0) ? x : T(0); }
};

template <typename T>
struct SigmoidFunctor {
  explicit SigmoidFunctor(const AttrView&) {}
  T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
};

template <typename T>
struct TanhFunctor {
  explicit TanhFunctor(const AttrView&) {}
  T operator()(T x) const { return std::tanh(x); }
};

// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).
template <typename T>
struct GeluFunctor {
  explicit GeluFunctor(const AttrView&) {}
  T operator()(T x) const { return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2))); }
};

template <typename T>
struct ScalarAddFunctor {
  explicit ScalarAddFunctor(const AttrView& attrs)
      : value(static_cast<T>(attrs.GetFloatOr("value", 0.0))) {}
  T operator()(T x) const { return x + value; }
  T value;
};

template <typename T>
struct ScalarMulFunctor {
  explicit ScalarMulFunctor(const AttrView& attrs)
      : value(static_cast<T>(attrs.GetFloatOr("value", 0.0))) {}
  T operator()(T x) const { return x * value; }
  T value;
};

template <typename T>
struct ScalarPowFunctor {
  explicit ScalarPowFunctor(const AttrView& attrs)
      : exponent(static_cast<T>(attrs.GetFloatOr("exponent", 1.0))) {}
  T operator()(T x) const { return std::pow(x, exponent); }
  T exponent;
};

template <typename T>
struct ReluGradFunctor {
  T operator()(T dy, T y) const { return y > T(0) ? dy : T(0); }
};

template <typename T>
struct SigmoidGradFunctor {
  T operator()(T dy, T y) const { return dy * y * (T(1) - y); }
};

template <typename T>
struct TanhGradFunctor {
  T operator()(T dy, T y) const { return dy * (T(1) - y * y); }
};

// gelu'(x) = Phi(x) + x * phi(x).
template <typename T>
struct GeluGradFunctor {
  T operator()(T dy, T x) const {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
    return dy * (cdf + x * pdf);
  }
};

template <typename T>
struct SubFunctor {
  T operator()(T x, T y) const { return x - y; }
};

template <typename T>
struct MulFunctor {
  T operator()(T x, T y) const { return x * y; }
};

template <typename T>
struct DivFunctor {
  T operator()(T x, T y) const { return x / y; }
};

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_ELEMENTWISE_FUNCTORS_H_
