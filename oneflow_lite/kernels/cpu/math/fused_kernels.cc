// CPU kernels of the fused ops (ops/math/fused_ops.cc) the compiler
// substitutes for op chains (compiler/fusion.h). Each computes, element by
// element, exactly what the chain computes (same float operations in the
// same order), in one pass over memory; fused_kernels_test.cc runs the chain
// of plain kernels as the reference.
#include <type_traits>

#include "oneflow_lite/kernels/cpu/vec/vec.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

// y = relu(a + b broadcast along `axis` of a).
template <typename T>
class BiasAddReluKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& a = ctx->Input("a");
    const Blob& b = ctx->Input("b");
    Blob* out = ctx->Output("y");
    const Shape& shape = a.shape();
    int64_t axis = 0;
    if (!NormalizeAxis(ctx->attrs().GetIntOr("axis", 1), shape.rank(), &axis) ||
        b.elem_count() != shape.dim(axis) || out->shape() != shape) {
      return ctx->Error("bad blobs for bias_add_relu: a ", shape, ", b ", b.shape(), ", y ",
                        out->shape());
    }
    const int64_t outer = shape.Count(0, axis);
    const int64_t channels = shape.dim(axis);
    const int64_t inner = shape.Count(axis + 1);
    const T* x = a.data<T>();
    const T* bias = b.data<T>();
    T* y = out->data<T>();
    if constexpr (std::is_same_v<T, float>) {
      if (inner == 1) {
        vec::Active().bias_add_rows(x, bias, y, outer, channels, /*relu=*/true);
      } else {
        vec::Active().bias_add_inner(x, bias, y, outer, channels, inner, /*relu=*/true);
      }
      return Status::OK();
    }
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t base = (o * channels + c) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          const T v = x[base + i] + bias[c];
          y[base + i] = v > T(0) ? v : T(0);
        }
      }
    }
    return Status::OK();
  }
};

REGISTER_KERNEL("bias_add_relu", DEVICE_CPU, DT_FLOAT, BiasAddReluKernel<float>);
REGISTER_KERNEL("bias_add_relu", DEVICE_CPU, DT_DOUBLE, BiasAddReluKernel<double>);

}  // namespace
}  // namespace math
}  // namespace oflite
