// Scalar functors of the unary math ops exp, log, sqrt, rsqrt, abs, neg,
// clamp, leaky_relu, silu and of their (dy, x) -> dx gradient ops. Plain
// inline arithmetic; functors taking attributes read them at construction
// (kernel Init). Semantics at NaN and at the bounds: docs/ops.md.
#ifndef ONEFLOW_LITE_KERNELS_CPU_MATH_UNARY_MATH_FUNCTORS_H_
#define ONEFLOW_LITE_KERNELS_CPU_MATH_UNARY_MATH_FUNCTORS_H_

#include <cmath>
#include <limits>

#include "oneflow_lite/common/attr.h"

namespace oflite {
namespace math {

#define OFLITE_PLAIN_FUNCTOR(Name, expr)       \
  template <typename T>                        \
  struct Name {                                \
    explicit Name(const AttrView&) {}          \
    T operator()(T x) const { return (expr); } \
  }

OFLITE_PLAIN_FUNCTOR(ExpFunctor, std::exp(x));
OFLITE_PLAIN_FUNCTOR(LogFunctor, std::log(x));
OFLITE_PLAIN_FUNCTOR(SqrtFunctor, std::sqrt(x));
OFLITE_PLAIN_FUNCTOR(RsqrtFunctor, T(1) / std::sqrt(x));
OFLITE_PLAIN_FUNCTOR(AbsFunctor, std::abs(x));
OFLITE_PLAIN_FUNCTOR(NegFunctor, -x);
OFLITE_PLAIN_FUNCTOR(SiluFunctor, x / (T(1) + std::exp(-x)));
#undef OFLITE_PLAIN_FUNCTOR

// Bounds of clamp: an absent min (max) is -inf (+inf).
template <typename T>
struct ClampBounds {
  explicit ClampBounds(const AttrView& attrs)
      : lo(attrs.Has("min") ? static_cast<T>(attrs.GetFloatOr("min", 0))
                            : -std::numeric_limits<T>::infinity()),
        hi(attrs.Has("max") ? static_cast<T>(attrs.GetFloatOr("max", 0))
                            : std::numeric_limits<T>::infinity()) {}
  T lo, hi;
};

// NaN stays NaN (both comparisons are false).
template <typename T>
struct ClampFunctor {
  explicit ClampFunctor(const AttrView& attrs) : b(attrs) {}
  T operator()(T x) const { return x < b.lo ? b.lo : (x > b.hi ? b.hi : x); }
  ClampBounds<T> b;
};

template <typename T>
struct LeakyReluFunctor {
  explicit LeakyReluFunctor(const AttrView& attrs)
      : alpha(static_cast<T>(attrs.GetFloatOr("alpha", 0.01))) {}
  T operator()(T x) const { return x > T(0) ? x : alpha * x; }
  T alpha;
};

// sign(x) * dy, 0 at x == 0 (and for NaN x).
template <typename T>
struct AbsGradFunctor {
  explicit AbsGradFunctor(const AttrView&) {}
  T operator()(T dy, T x) const { return x > T(0) ? dy : (x < T(0) ? -dy : T(0)); }
};

// The gradient passes where min <= x <= max (bounds included), 0 elsewhere
// and for NaN x.
template <typename T>
struct ClampGradFunctor {
  explicit ClampGradFunctor(const AttrView& attrs) : b(attrs) {}
  T operator()(T dy, T x) const { return (x >= b.lo && x <= b.hi) ? dy : T(0); }
  ClampBounds<T> b;
};

// Slope alpha at x <= 0 (x == 0 included).
template <typename T>
struct LeakyReluGradFunctor {
  explicit LeakyReluGradFunctor(const AttrView& attrs)
      : alpha(static_cast<T>(attrs.GetFloatOr("alpha", 0.01))) {}
  T operator()(T dy, T x) const { return x > T(0) ? dy : alpha * dy; }
  T alpha;
};

// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
template <typename T>
struct SiluGradFunctor {
  explicit SiluGradFunctor(const AttrView&) {}
  T operator()(T dy, T x) const {
    const T s = T(1) / (T(1) + std::exp(-x));
    return dy * s * (T(1) + x * (T(1) - s));
  }
};

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_UNARY_MATH_FUNCTORS_H_
