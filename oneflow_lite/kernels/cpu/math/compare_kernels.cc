// CPU kernels of iota and the comparisons (ops/math/compare_ops.cc).
// Comparisons broadcast over the output's shape with StridedLoop and write
// uint8 1/0; NaN compares false except under not_equal (IEEE). iota writes
// the index along its axis in the output's dtype. Both are registered under
// every dtype their first input may have.
#include <functional>

#include "oneflow_lite/kernels/cpu/math/strided_loop.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

// out[outer, size, inner] = index along the middle axis.
template <typename T>
void IotaLoop(T* out, int64_t outer, int64_t size, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t a = 0; a < size; ++a) {
      T* row = out + (o * size + a) * inner;
      const T value = static_cast<T>(a);
      for (int64_t i = 0; i < inner; ++i) row[i] = value;
    }
  }
}

class IotaKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    axis_ = ctx.attrs().GetIntOr("axis", 0);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    Blob* out = ctx->Output("out");
    const Shape& shape = out->shape();
    if (ctx->Input("like").shape() != shape) {
      return ctx->Error("like ", ctx->Input("like").shape(), " vs out ", shape);
    }
    int64_t axis = 0;
    if (!NormalizeAxis(axis_, shape.rank(), &axis)) {
      return ctx->Error("axis ", axis_, " is out of range for rank ", shape.rank());
    }
    const int64_t outer = shape.Count(0, axis), size = shape.dim(axis);
    const int64_t inner = shape.Count(axis + 1);
    switch (out->dtype()) {
      case DT_INT32:
        IotaLoop(out->data<int32_t>(), outer, size, inner);
        break;
      case DT_INT64:
        IotaLoop(out->data<int64_t>(), outer, size, inner);
        break;
      case DT_FLOAT:
        IotaLoop(out->data<float>(), outer, size, inner);
        break;
      case DT_DOUBLE:
        IotaLoop(out->data<double>(), outer, size, inner);
        break;
      default:
        return ctx->Error("unsupported output dtype ", DataTypeName(out->dtype()));
    }
    return Status::OK();
  }

 private:
  int64_t axis_ = 0;
};

// out = Compare()(x, y) ? 1 : 0 with numpy broadcasting.
template <typename T, typename Compare>
class CompareKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* out = ctx->Output("out");
    Shape shape;
    if (!BroadcastShapes(x.shape(), y.shape(), &shape) || shape != out->shape()) {
      return ctx->Error("x ", x.shape(), " and y ", y.shape(), " do not broadcast to out ",
                        out->shape());
    }
    const StridedLoop loop(out->shape().dims(), {ContiguousStrides(out->shape()),
                                                 BroadcastStrides(x.shape(), out->shape()),
                                                 BroadcastStrides(y.shape(), out->shape())});
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    uint8_t* c = out->data<uint8_t>();
    const int64_t sa = loop.InnerStride(1), sb = loop.InnerStride(2);
    const Compare compare;
    loop.ForEachRow([&](const int64_t* offsets, int64_t n) {
      uint8_t* o = c + offsets[0];
      const T* p = a + offsets[1];
      const T* q = b + offsets[2];
      for (int64_t i = 0; i < n; ++i) o[i] = compare(p[i * sa], q[i * sb]) ? 1 : 0;
    });
    return Status::OK();
  }
};

#define OFLITE_COMPARE_KERNELS(type, Compare)                                            \
  REGISTER_KERNEL(type, DEVICE_CPU, DT_FLOAT, CompareKernel<float, Compare<float>>);     \
  REGISTER_KERNEL(type, DEVICE_CPU, DT_DOUBLE, CompareKernel<double, Compare<double>>);  \
  REGISTER_KERNEL(type, DEVICE_CPU, DT_INT32, CompareKernel<int32_t, Compare<int32_t>>); \
  REGISTER_KERNEL(type, DEVICE_CPU, DT_INT64, CompareKernel<int64_t, Compare<int64_t>>)

OFLITE_COMPARE_KERNELS("equal", std::equal_to);
OFLITE_COMPARE_KERNELS("not_equal", std::not_equal_to);
OFLITE_COMPARE_KERNELS("less", std::less);
OFLITE_COMPARE_KERNELS("less_equal", std::less_equal);
OFLITE_COMPARE_KERNELS("greater", std::greater);
OFLITE_COMPARE_KERNELS("greater_equal", std::greater_equal);

#undef OFLITE_COMPARE_KERNELS

REGISTER_KERNEL("iota", DEVICE_CPU, DT_FLOAT, IotaKernel);
REGISTER_KERNEL("iota", DEVICE_CPU, DT_DOUBLE, IotaKernel);
REGISTER_KERNEL("iota", DEVICE_CPU, DT_INT32, IotaKernel);
REGISTER_KERNEL("iota", DEVICE_CPU, DT_INT64, IotaKernel);
REGISTER_KERNEL("iota", DEVICE_CPU, DT_UINT8, IotaKernel);

}  // namespace
}  // namespace math
}  // namespace oflite
