// CUDA kernels of iota and the comparisons (docs/ops.md), for every dtype
// their first input may have: float32, float64, int32, int64 (iota also
// uint8 like). Extents come from the bound blobs, so split shapes work as is.
#include "oneflow_lite/kernels/cuda/compare_launch.h"
#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace cuda {
namespace {

StatusOr<ValueKind> KindOf(const KernelContext& ctx, DataType dtype) {
  switch (dtype) {
    case DT_FLOAT: return ValueKind::kF32;
    case DT_DOUBLE: return ValueKind::kF64;
    case DT_INT32: return ValueKind::kI32;
    case DT_INT64: return ValueKind::kI64;
    default: return ctx.Error("unsupported dtype ", DataTypeName(dtype));
  }
}

template <CompareOp kOp>
class CompareKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* out = ctx->Output("out");
    Shape shape;
    if (x.dtype() != y.dtype() || !math::BroadcastShapes(x.shape(), y.shape(), &shape) ||
        shape != out->shape()) {
      return ctx->Error("cannot compare x ", x.shape(), " and y ", y.shape(), " into out ",
                        out->shape());
    }
    ASSIGN_OR_RETURN(ValueKind kind, KindOf(*ctx, x.dtype()));
    ASSIGN_OR_RETURN(StridedIndex index,
                     MakeIndex(shape.dims(), {BroadcastStrides(x.shape(), shape),
                                              BroadcastStrides(y.shape(), shape)}));
    CUDA_LAUNCH_RETURN_IF_ERROR(*ctx, LaunchCompare(kOp, kind, x.raw(), y.raw(),
                                                    out->data<uint8_t>(), index, cuda->stream()));
    return Status::OK();
  }
};

class IotaKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    Blob* out = ctx->Output("out");
    const Shape& shape = out->shape();
    int64_t axis = 0;
    if (!math::NormalizeAxis(ctx->attrs().GetIntOr("axis", 0), shape.rank(), &axis)) {
      return ctx->Error("axis is out of range for rank ", shape.rank());
    }
    ASSIGN_OR_RETURN(ValueKind kind, KindOf(*ctx, out->dtype()));
    CUDA_LAUNCH_RETURN_IF_ERROR(*ctx, LaunchIota(kind, out->raw(), shape.Count(0, axis),
                                                 shape.dim(axis), shape.Count(axis + 1),
                                                 cuda->stream()));
    return Status::OK();
  }
};

#define OFLITE_CUDA_COMPARE(type, op)                                       \
  REGISTER_KERNEL(type, DEVICE_CUDA, DT_FLOAT, CompareKernel<op>);          \
  REGISTER_KERNEL(type, DEVICE_CUDA, DT_DOUBLE, CompareKernel<op>);         \
  REGISTER_KERNEL(type, DEVICE_CUDA, DT_INT32, CompareKernel<op>);          \
  REGISTER_KERNEL(type, DEVICE_CUDA, DT_INT64, CompareKernel<op>)

OFLITE_CUDA_COMPARE("equal", CompareOp::kEqual);
OFLITE_CUDA_COMPARE("not_equal", CompareOp::kNotEqual);
OFLITE_CUDA_COMPARE("less", CompareOp::kLess);
OFLITE_CUDA_COMPARE("less_equal", CompareOp::kLessEqual);
OFLITE_CUDA_COMPARE("greater", CompareOp::kGreater);
OFLITE_CUDA_COMPARE("greater_equal", CompareOp::kGreaterEqual);

#undef OFLITE_CUDA_COMPARE

REGISTER_KERNEL("iota", DEVICE_CUDA, DT_FLOAT, IotaKernel);
REGISTER_KERNEL("iota", DEVICE_CUDA, DT_DOUBLE, IotaKernel);
REGISTER_KERNEL("iota", DEVICE_CUDA, DT_INT32, IotaKernel);
REGISTER_KERNEL("iota", DEVICE_CUDA, DT_INT64, IotaKernel);
REGISTER_KERNEL("iota", DEVICE_CUDA, DT_UINT8, IotaKernel);

}  // namespace
}  // namespace cuda
}  // namespace oflite
