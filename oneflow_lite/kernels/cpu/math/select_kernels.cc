// CPU kernels of maximum, minimum, maximum_grad, minimum_grad and where, with
// numpy broadcasting over the output's shape (StridedLoop). float32/float64
// (where also int32/int64 values; its condition bool/uint8/int32/int64).
// NaN and tie rules: see oneflow_lite/ops/math/select_ops.cc.
#include <cmath>

#include "oneflow_lite/kernels/cpu/math/strided_loop.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

template <typename T>
struct MaxOp {
  static T Select(T x, T y) {
    if (std::isnan(x)) return x;
    if (std::isnan(y)) return y;
    return x >= y ? x : y;
  }
  static bool Wins(T x, T y) { return x > y; }
};

template <typename T>
struct MinOp {
  static T Select(T x, T y) {
    if (std::isnan(x)) return x;
    if (std::isnan(y)) return y;
    return x <= y ? x : y;
  }
  static bool Wins(T x, T y) { return x < y; }
};

// The share of the gradient that x gets: 1 if x is NaN or wins, 0.5 on a
// tie, 0 if y is NaN or wins.
template <typename T, typename Op>
T ShareOfX(T x, T y) {
  if (std::isnan(x)) return T(1);
  if (std::isnan(y)) return T(0);
  if (x == y) return T(0.5);
  return Op::Wins(x, y) ? T(1) : T(0);
}

// Shape check shared by the kernels: every input broadcasts to `out`.
Status CheckBroadcast(KernelContext* ctx, const std::vector<const Blob*>& inputs,
                      const Shape& out) {
  Shape shape = inputs[0]->shape();
  for (size_t i = 1; i < inputs.size(); ++i) {
    Shape next;
    if (!BroadcastShapes(shape, inputs[i]->shape(), &next))
      shape = Shape({-1});
    else
      shape = next;
  }
  if (shape != out) {
    std::string text;
    for (const Blob* b : inputs) text += " " + b->shape().ToString();
    return ctx->Error("inputs", text, " do not broadcast to the output ", out);
  }
  return Status::OK();
}

StridedLoop LoopOver(const Shape& out, const std::vector<const Blob*>& inputs) {
  std::vector<std::vector<int64_t>> strides = {ContiguousStrides(out)};
  for (const Blob* b : inputs) strides.push_back(BroadcastStrides(b->shape(), out));
  return StridedLoop(out.dims(), strides);
}

template <typename T, typename Op>
class MinMaxKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* out = ctx->Output("out");
    RETURN_IF_ERROR(CheckBroadcast(ctx, {&x, &y}, out->shape()));
    const StridedLoop loop = LoopOver(out->shape(), {&x, &y});
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* c = out->data<T>();
    const int64_t sa = loop.InnerStride(1), sb = loop.InnerStride(2);
    loop.ForEachRow([&](const int64_t* offsets, int64_t n) {
      T* o = c + offsets[0];
      const T* p = a + offsets[1];
      const T* q = b + offsets[2];
      for (int64_t i = 0; i < n; ++i) o[i] = Op::Select(p[i * sa], q[i * sb]);
    });
    return Status::OK();
  }
};

// dx = dz * ShareOfX(x, y), in dz's (the output's) shape.
template <typename T, typename Op>
class MinMaxGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& dz = ctx->Input("dz");
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* dx = ctx->Output("dx");
    RETURN_IF_ERROR(CheckBroadcast(ctx, {&x, &y}, dx->shape()));
    if (dz.shape() != dx->shape()) return ctx->Error("dz ", dz.shape(), " vs dx ", dx->shape());
    const StridedLoop loop = LoopOver(dx->shape(), {&dz, &x, &y});
    const T* g = dz.data<T>();
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* c = dx->data<T>();
    const int64_t sg = loop.InnerStride(1), sa = loop.InnerStride(2), sb = loop.InnerStride(3);
    loop.ForEachRow([&](const int64_t* offsets, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        c[offsets[0] + i] = g[offsets[1] + i * sg] *
                            ShareOfX<T, Op>(a[offsets[2] + i * sa], b[offsets[3] + i * sb]);
      }
    });
    return Status::OK();
  }
};

template <typename T, typename C>
void WhereLoop(const StridedLoop& loop, const C* cond, const T* a, const T* b, T* c) {
  const int64_t sc = loop.InnerStride(1), sa = loop.InnerStride(2), sb = loop.InnerStride(3);
  loop.ForEachRow([&](const int64_t* offsets, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      c[offsets[0] + i] =
          cond[offsets[1] + i * sc] != C(0) ? a[offsets[2] + i * sa] : b[offsets[3] + i * sb];
    }
  });
}

// Registered under every dtype that can come first in the OpConf (the
// condition's or the values'); dispatches on both at run time.
class WhereKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& cond = ctx->Input("condition");
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* out = ctx->Output("out");
    RETURN_IF_ERROR(CheckBroadcast(ctx, {&cond, &x, &y}, out->shape()));
    const StridedLoop loop = LoopOver(out->shape(), {&cond, &x, &y});
    switch (x.dtype()) {
      case DT_FLOAT:
        return Dispatch<float>(ctx, loop, cond, x, y, out);
      case DT_DOUBLE:
        return Dispatch<double>(ctx, loop, cond, x, y, out);
      case DT_INT32:
        return Dispatch<int32_t>(ctx, loop, cond, x, y, out);
      case DT_INT64:
        return Dispatch<int64_t>(ctx, loop, cond, x, y, out);
      default:
        return ctx->Error("unsupported value dtype ", DataTypeName(x.dtype()));
    }
  }

 private:
  template <typename T>
  Status Dispatch(KernelContext* ctx, const StridedLoop& loop, const Blob& cond, const Blob& x,
                  const Blob& y, Blob* out) {
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* c = out->data<T>();
    switch (cond.dtype()) {
      case DT_BOOL:
        WhereLoop(loop, cond.data<bool>(), a, b, c);
        break;
      case DT_UINT8:
        WhereLoop(loop, cond.data<uint8_t>(), a, b, c);
        break;
      case DT_INT32:
        WhereLoop(loop, cond.data<int32_t>(), a, b, c);
        break;
      case DT_INT64:
        WhereLoop(loop, cond.data<int64_t>(), a, b, c);
        break;
      default:
        return ctx->Error("unsupported condition dtype ", DataTypeName(cond.dtype()));
    }
    return Status::OK();
  }
};

REGISTER_KERNEL("maximum", DEVICE_CPU, DT_FLOAT, MinMaxKernel<float, MaxOp<float>>);
REGISTER_KERNEL("maximum", DEVICE_CPU, DT_DOUBLE, MinMaxKernel<double, MaxOp<double>>);
REGISTER_KERNEL("minimum", DEVICE_CPU, DT_FLOAT, MinMaxKernel<float, MinOp<float>>);
REGISTER_KERNEL("minimum", DEVICE_CPU, DT_DOUBLE, MinMaxKernel<double, MinOp<double>>);
REGISTER_KERNEL("maximum_grad", DEVICE_CPU, DT_FLOAT, MinMaxGradKernel<float, MaxOp<float>>);
REGISTER_KERNEL("maximum_grad", DEVICE_CPU, DT_DOUBLE, MinMaxGradKernel<double, MaxOp<double>>);
REGISTER_KERNEL("minimum_grad", DEVICE_CPU, DT_FLOAT, MinMaxGradKernel<float, MinOp<float>>);
REGISTER_KERNEL("minimum_grad", DEVICE_CPU, DT_DOUBLE, MinMaxGradKernel<double, MinOp<double>>);
REGISTER_KERNEL("where", DEVICE_CPU, DT_BOOL, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CPU, DT_UINT8, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CPU, DT_INT32, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CPU, DT_INT64, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CPU, DT_FLOAT, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CPU, DT_DOUBLE, WhereKernel);

}  // namespace
}  // namespace math
}  // namespace oflite
