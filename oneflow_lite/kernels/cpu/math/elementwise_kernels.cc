// CPU kernels for the elementwise math ops: activations and their gradients,
// scalar ops, add (add_n), broadcasting broadcast_add/sub/mul/div, identity,
// zeros_like and cast. Every hot loop is a plain indexed loop over contiguous
// memory; the float32 relu, relu_grad, add and broadcast_add loops run the
// vectorized, ISA-dispatched versions (kernels/cpu/vec/vec.h), which these
// plain loops are tested against. The activations, their gradients, the
// scalar ops, add and broadcast_add split their elements over threads
// (kernels/cpu/parallel_rows.h); every element is computed alone, so the
// thread count changes no bit.
#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "oneflow_lite/kernels/cpu/math/copy_kernel.h"
#include "oneflow_lite/kernels/cpu/math/elementwise_functors.h"
#include "oneflow_lite/kernels/cpu/math/strided_loop.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/cpu/vec/vec.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

// Work of one element of F, in units of one float32 add: the
// transcendental functions cost about ten, so smaller tensors are worth
// splitting over threads (kernels/cpu/parallel_rows.h).
template <typename F>
constexpr int64_t kElementWork = 1;
template <typename T>
constexpr int64_t kElementWork<SigmoidFunctor<T>> = 8;
template <typename T>
constexpr int64_t kElementWork<TanhFunctor<T>> = 8;
template <typename T>
constexpr int64_t kElementWork<ScalarPowFunctor<T>> = 8;

// y = F(x) elementwise; `in`/`out` are the op's argument names.
template <typename T, typename F>
class UnaryKernel final : public Kernel {
 public:
  UnaryKernel(const char* in, const char* out) : in_(in), out_(out) {}

  Status Init(const KernelInitContext& ctx) override {
    functor_.emplace(ctx.attrs());
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input(in_);
    Blob* y = ctx->Output(out_);
    if (x.elem_count() != y->elem_count()) {
      return ctx->Error("blob sizes disagree: ", in_, " ", x.shape(), ", ", out_, " ", y->shape());
    }
    const T* in = x.data<T>();
    T* out = y->data<T>();
    const F f = *functor_;
    ParallelElements(
        x.elem_count(),
        [&](int64_t begin, int64_t end) {
          if constexpr (std::is_same_v<F, ReluFunctor<float>>) {
            vec::Active().relu(in + begin, out + begin, end - begin);
          } else {
            for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
          }
        },
        kElementWork<F>);
    return Status::OK();
  }

 private:
  const char* in_;
  const char* out_;
  std::optional<F> functor_;
};

// dx = F(dy, saved) elementwise.
template <typename T, typename F>
class GradKernel final : public Kernel {
 public:
  explicit GradKernel(const char* saved) : saved_(saved) {}

  Status Forward(KernelContext* ctx) override {
    const Blob& dy = ctx->Input("dy");
    const Blob& saved = ctx->Input(saved_);
    Blob* dx = ctx->Output("dx");
    const int64_t n = dy.elem_count();
    if (saved.elem_count() != n || dx->elem_count() != n) {
      return ctx->Error("blob sizes disagree: dy ", dy.shape(), ", ", saved_, " ", saved.shape(),
                        ", dx ", dx->shape());
    }
    const T* g = dy.data<T>();
    const T* s = saved.data<T>();
    T* out = dx->data<T>();
    const F f;
    ParallelElements(n, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<F, ReluGradFunctor<float>>) {
        vec::Active().relu_grad(g + begin, s + begin, out + begin, end - begin);
      } else {
        for (int64_t i = begin; i < end; ++i) out[i] = f(g[i], s[i]);
      }
    });
    return Status::OK();
  }

 private:
  const char* saved_;
};

// out = F(x, y) with numpy broadcasting over out's shape.
template <typename T, typename F>
class BroadcastBinaryKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* out = ctx->Output("out");
    Shape expected;
    if (!BroadcastShapes(x.shape(), y.shape(), &expected) || expected != out->shape()) {
      return ctx->Error("blob shapes disagree: x ", x.shape(), ", y ", y.shape(), ", out ",
                        out->shape());
    }
    const Shape& shape = out->shape();
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* c = out->data<T>();
    const F f;
    if (x.shape() == shape && y.shape() == shape) {
      // Equal shapes (e.g. the mul that replaces a fused gelu's gradient,
      // compiler/fusion.h): one flat loop split over the threads. Its
      // operands are often out of cache (a derivative saved in the forward
      // pass); asking for the line 4 KiB ahead, past the page the hardware
      // prefetcher stops at, keeps the loop near memory bandwidth. Each
      // element is computed alone: the thread count changes no bit.
      ParallelElements(shape.elem_count(), [&](int64_t begin, int64_t end) {
        constexpr int64_t kBlock = 64 / sizeof(T);
        constexpr int64_t kAhead = 4096 / sizeof(T);
        int64_t i = begin;
        for (; i + kBlock <= end; i += kBlock) {
          __builtin_prefetch(a + i + kAhead);
          __builtin_prefetch(b + i + kAhead);
          for (int64_t k = i; k < i + kBlock; ++k) c[k] = f(a[k], b[k]);
        }
        for (; i < end; ++i) c[i] = f(a[i], b[i]);
      });
      return Status::OK();
    }
    StridedLoop loop(shape.dims(), {ContiguousStrides(shape), BroadcastStrides(x.shape(), shape),
                                    BroadcastStrides(y.shape(), shape)});
    const int64_t sa = loop.InnerStride(1), sb = loop.InnerStride(2);
    loop.ForEachRow([&](const int64_t* offsets, int64_t n) {
      T* o = c + offsets[0];
      const T* p = a + offsets[1];
      const T* q = b + offsets[2];
      if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(p[i], q[i]);
      } else if (sa == 1 && sb == 0) {
        const T v = *q;
        for (int64_t i = 0; i < n; ++i) o[i] = f(p[i], v);
      } else if (sa == 0 && sb == 1) {
        const T v = *p;
        for (int64_t i = 0; i < n; ++i) o[i] = f(v, q[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = f(p[i * sa], q[i * sb]);
      }
    });
    return Status::OK();
  }
};

template <typename T>
struct AddFunctor {
  T operator()(T x, T y) const { return x + y; }
};

// out[o * n + i] = a[o * n + i] + b[i]: `b` repeated over `outer` blocks of
// n elements (outer 1: equal shapes).
// The blocks are split over threads (kernels/cpu/parallel_rows.h), or with
// one block its elements.
template <typename T>
void AddRepeated(const T* a, const T* b, T* out, int64_t outer, int64_t n) {
  auto add = [](const T* p, const T* q, T* o, int64_t count) {
    if constexpr (std::is_same_v<T, float>) {
      vec::Active().add(p, q, o, count);
    } else {
      for (int64_t i = 0; i < count; ++i) o[i] = p[i] + q[i];
    }
  };
  if (outer == 1) {
    ParallelElements(n, [&](int64_t begin, int64_t end) {
      add(a + begin, b + begin, out + begin, end - begin);
    });
    return;
  }
  ParallelRows(outer, n, [&](int64_t first, int64_t last) {
    for (int64_t o = first; o < last; ++o) add(a + o * n, b, out + o * n, n);
  });
}

// Whether `small` broadcasts against `full` along leading axes only: after
// dropping its leading 1s, `small` is a suffix of `full` (e.g. [T, C] or
// [1, C] against [B, T, C]). Then small's elements repeat contiguously.
bool IsTrailingBlockOf(const Shape& small, const Shape& full) {
  if (small.rank() > full.rank()) return false;
  int64_t first = 0;
  while (first < small.rank() && small.dim(first) == 1) ++first;
  const int64_t kept = small.rank() - first;
  if (kept > full.rank()) return false;
  for (int64_t i = 0; i < kept; ++i) {
    if (small.dim(first + i) != full.dim(full.rank() - kept + i)) return false;
  }
  return true;
}

// broadcast_add: out = x + y with numpy broadcasting. Equal shapes and an
// operand repeated along leading axes ([B, T, C] + [T, C] or + [C], either
// order) run contiguous vectorized blocks; anything else the strided loop.
template <typename T>
class BroadcastAddKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* out = ctx->Output("out");
    const Shape& shape = out->shape();
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* c = out->data<T>();
    const bool x_full = x.shape() == shape, y_full = y.shape() == shape;
    if (x_full && y_full) {
      AddRepeated(a, b, c, 1, shape.elem_count());
      return Status::OK();
    }
    if (x_full && y.elem_count() > 0 && IsTrailingBlockOf(y.shape(), shape)) {
      AddRepeated(a, b, c, shape.elem_count() / y.elem_count(), y.elem_count());
      return Status::OK();
    }
    if (y_full && x.elem_count() > 0 && IsTrailingBlockOf(x.shape(), shape)) {
      AddRepeated(b, a, c, shape.elem_count() / x.elem_count(), x.elem_count());
      return Status::OK();
    }
    return general_.Forward(ctx);
  }

 private:
  BroadcastBinaryKernel<T, AddFunctor<T>> general_;
};

// out = in[0] + in[1] + ... (equal shapes), added left to right per
// element. Elements are split over threads (kernels/cpu/parallel_rows.h)
// and walked in blocks that stay in the L1 cache while every input is added.
template <typename T>
class AddKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    Blob* out = ctx->Output("out");
    const int64_t n = out->elem_count();
    const int count = ctx->InputCount("in");
    inputs_.clear();
    for (int k = 0; k < count; ++k) {
      if (ctx->Input("in", k).elem_count() != n) {
        return ctx->Error("blob sizes disagree: in[", k, "] ", ctx->Input("in", k).shape(),
                          ", out ", out->shape());
      }
      inputs_.push_back(ctx->Input("in", k).data<T>());
    }
    T* o = out->data<T>();
    if (count == 1) {
      CopyBytes(inputs_[0], o, n * sizeof(T));
      return Status::OK();
    }
    ParallelElements(n, [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; block += kBlock) {
        AddBlock(block, std::min(end - block, kBlock), o);
      }
    });
    return Status::OK();
  }

 private:
  static constexpr int64_t kBlock = 2048;

  // o[begin, begin + n) = sum of the inputs there.
  void AddBlock(int64_t begin, int64_t n, T* o) const {
    const int count = static_cast<int>(inputs_.size());
    T* q = o + begin;
    if constexpr (std::is_same_v<T, float>) {
      vec::Active().add(inputs_[0] + begin, inputs_[1] + begin, q, n);
      for (int k = 2; k < count; ++k) vec::Active().add_into(inputs_[k] + begin, q, n);
      return;
    }
    const T* first = inputs_[0] + begin;
    const T* second = inputs_[1] + begin;
    for (int64_t i = 0; i < n; ++i) q[i] = first[i] + second[i];
    for (int k = 2; k < count; ++k) {
      const T* p = inputs_[k] + begin;
      for (int64_t i = 0; i < n; ++i) q[i] += p[i];
    }
  }

  // The inputs' data (kept between calls: no allocation once sized).
  std::vector<const T*> inputs_;
};

class ZerosLikeKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    Blob* out = ctx->Output("out");
    if (out->ByteSize() > 0) std::memset(out->raw(), 0, out->ByteSize());
    return Status::OK();
  }
};

// `constant`: every element the attr `value`, rounded once to T.
template <typename T>
class ConstantKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(const double v, ctx.attrs().GetFloat("value"));
    value_ = static_cast<T>(v);
    return Status::OK();
  }
  Status Forward(KernelContext* ctx) override {
    Blob* out = ctx->Output("out");
    std::fill_n(out->data<T>(), out->elem_count(), value_);
    return Status::OK();
  }

 private:
  T value_ = T(0);
};

template <typename From, typename To>
void CastLoop(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(in[i]);
}

template <typename From>
class CastKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& in = ctx->Input("in");
    Blob* out = ctx->Output("out");
    const int64_t n = in.elem_count();
    if (out->elem_count() != n) {
      return ctx->Error("blob sizes disagree: in ", in.shape(), ", out ", out->shape());
    }
    const From* p = in.data<From>();
    switch (out->dtype()) {
      case DT_FLOAT:
        CastLoop(p, out->data<float>(), n);
        break;
      case DT_DOUBLE:
        CastLoop(p, out->data<double>(), n);
        break;
      case DT_INT32:
        CastLoop(p, out->data<int32_t>(), n);
        break;
      case DT_INT64:
        CastLoop(p, out->data<int64_t>(), n);
        break;
      case DT_INT8:
        CastLoop(p, out->data<int8_t>(), n);
        break;
      case DT_UINT8:
        CastLoop(p, out->data<uint8_t>(), n);
        break;
      case DT_BOOL: {
        bool* o = out->data<bool>();
        for (int64_t i = 0; i < n; ++i) o[i] = p[i] != From(0);
        break;
      }
      default:
        return ctx->Error("cannot cast to ", DataTypeName(out->dtype()));
    }
    return Status::OK();
  }
};

#define OFLITE_MATH_UNARY(op, in, out, Functor)                                    \
  template <typename T>                                                            \
  class Functor##Kernel final : public Kernel {                                    \
   public:                                                                         \
    Status Init(const KernelInitContext& ctx) override { return impl_.Init(ctx); } \
    Status Forward(KernelContext* ctx) override { return impl_.Forward(ctx); }     \
                                                                                   \
   private:                                                                        \
    UnaryKernel<T, Functor<T>> impl_{in, out};                                     \
  };                                                                               \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_FLOAT, Functor##Kernel<float>);               \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_DOUBLE, Functor##Kernel<double>)

#define OFLITE_MATH_GRAD(op, saved, Functor)                                   \
  template <typename T>                                                        \
  class Functor##Kernel final : public Kernel {                                \
   public:                                                                     \
    Status Forward(KernelContext* ctx) override { return impl_.Forward(ctx); } \
                                                                               \
   private:                                                                    \
    GradKernel<T, Functor<T>> impl_{saved};                                    \
  };                                                                           \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_FLOAT, Functor##Kernel<float>);           \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_DOUBLE, Functor##Kernel<double>)

OFLITE_MATH_UNARY("relu", "x", "y", ReluFunctor);
OFLITE_MATH_UNARY("sigmoid", "x", "y", SigmoidFunctor);
OFLITE_MATH_UNARY("tanh", "x", "y", TanhFunctor);
OFLITE_MATH_UNARY("scalar_add", "in", "out", ScalarAddFunctor);
OFLITE_MATH_UNARY("scalar_mul", "in", "out", ScalarMulFunctor);
OFLITE_MATH_UNARY("scalar_pow", "in", "out", ScalarPowFunctor);
OFLITE_MATH_GRAD("relu_grad", "y", ReluGradFunctor);
OFLITE_MATH_GRAD("sigmoid_grad", "y", SigmoidGradFunctor);
OFLITE_MATH_GRAD("tanh_grad", "y", TanhGradFunctor);

REGISTER_KERNEL("broadcast_add", DEVICE_CPU, DT_FLOAT, BroadcastAddKernel<float>);
REGISTER_KERNEL("broadcast_add", DEVICE_CPU, DT_DOUBLE, BroadcastAddKernel<double>);
REGISTER_KERNEL("sub", DEVICE_CPU, DT_FLOAT, BroadcastBinaryKernel<float, SubFunctor<float>>);
REGISTER_KERNEL("sub", DEVICE_CPU, DT_DOUBLE, BroadcastBinaryKernel<double, SubFunctor<double>>);
REGISTER_KERNEL("mul", DEVICE_CPU, DT_FLOAT, BroadcastBinaryKernel<float, MulFunctor<float>>);
REGISTER_KERNEL("mul", DEVICE_CPU, DT_DOUBLE, BroadcastBinaryKernel<double, MulFunctor<double>>);
REGISTER_KERNEL("div", DEVICE_CPU, DT_FLOAT, BroadcastBinaryKernel<float, DivFunctor<float>>);
REGISTER_KERNEL("div", DEVICE_CPU, DT_DOUBLE, BroadcastBinaryKernel<double, DivFunctor<double>>);
REGISTER_KERNEL("add", DEVICE_CPU, DT_FLOAT, AddKernel<float>);
REGISTER_KERNEL("add", DEVICE_CPU, DT_DOUBLE, AddKernel<double>);

class IdentityKernel final : public CopyKernel {
 public:
  IdentityKernel() : CopyKernel("in", "out") {}
};
REGISTER_KERNEL("identity", DEVICE_CPU, DT_FLOAT, IdentityKernel);
REGISTER_KERNEL("identity", DEVICE_CPU, DT_DOUBLE, IdentityKernel);
REGISTER_KERNEL("identity", DEVICE_CPU, DT_INT32, IdentityKernel);
REGISTER_KERNEL("identity", DEVICE_CPU, DT_INT64, IdentityKernel);
REGISTER_KERNEL("zeros_like", DEVICE_CPU, DT_FLOAT, ZerosLikeKernel);
REGISTER_KERNEL("zeros_like", DEVICE_CPU, DT_DOUBLE, ZerosLikeKernel);
REGISTER_KERNEL("zeros_like", DEVICE_CPU, DT_INT32, ZerosLikeKernel);
REGISTER_KERNEL("zeros_like", DEVICE_CPU, DT_INT64, ZerosLikeKernel);
REGISTER_KERNEL("constant", DEVICE_CPU, DT_FLOAT, ConstantKernel<float>);
REGISTER_KERNEL("constant", DEVICE_CPU, DT_DOUBLE, ConstantKernel<double>);
REGISTER_KERNEL("cast", DEVICE_CPU, DT_FLOAT, CastKernel<float>);
REGISTER_KERNEL("cast", DEVICE_CPU, DT_DOUBLE, CastKernel<double>);
REGISTER_KERNEL("cast", DEVICE_CPU, DT_INT32, CastKernel<int32_t>);
REGISTER_KERNEL("cast", DEVICE_CPU, DT_INT64, CastKernel<int64_t>);

}  // namespace
}  // namespace math
}  // namespace oflite
