// CUDA kernels (float32) of the unary math ops (exp, log, sqrt, rsqrt, abs,
// neg, clamp, leaky_relu, silu) and their gradients, maximum/minimum(+grad)
// and where; launchers in unary_select_launch.h. Extents come from the bound
// blobs, so split (physical) shapes run unchanged.
#include <limits>

#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"
#include "oneflow_lite/kernels/cuda/unary_select_launch.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace cuda {
namespace {

// Attribute parameters of the map ops, chosen by the op (as the CPU
// functors read them, kernels/cpu/math/unary_math_functors.h): leaky_relu's
// alpha (default 0.01) in p0; clamp's bounds in p0/p1 (an absent bound is
// infinite); nothing for the others. Guessing the op from which attributes
// are present read a clamp bound as leaky_relu_grad's alpha when an op
// carried both kinds (the GPU check's min=-0.5 on every grad op).
void MapParams(const AttrView& attrs, bool leaky_relu, bool clamp, float* p0, float* p1) {
  const float inf = std::numeric_limits<float>::infinity();
  *p0 = 0.f;
  *p1 = 0.f;
  if (leaky_relu) *p0 = static_cast<float>(attrs.GetFloatOr("alpha", 0.01));
  if (clamp) {
    *p0 = attrs.Has("min") ? static_cast<float>(attrs.GetFloatOr("min", 0)) : -inf;
    *p1 = attrs.Has("max") ? static_cast<float>(attrs.GetFloatOr("max", 0)) : inf;
  }
}

template <MapOp kOp>
class MapKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    MapParams(ctx.attrs(), kOp == MapOp::kLeakyRelu, kOp == MapOp::kClamp, &p0_, &p1_);
    return Status::OK();
  }
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    if (x.elem_count() != y->elem_count()) return ctx->Error("x and y sizes differ");
    CUDA_LAUNCH_RETURN_IF_ERROR(*ctx, LaunchMap(kOp, x.data<float>(), y->data<float>(),
                                                x.elem_count(), p0_, p1_, cuda->stream()));
    return Status::OK();
  }

 private:
  float p0_ = 0.f, p1_ = 0.f;
};

template <MapGradOp kOp>
class MapGradKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    MapParams(ctx.attrs(), kOp == MapGradOp::kLeakyRelu, kOp == MapGradOp::kClamp, &p0_, &p1_);
    return Status::OK();
  }
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& dy = ctx->Input("dy");
    const Blob& x = ctx->Input("x");
    Blob* dx = ctx->Output("dx");
    if (dy.elem_count() != x.elem_count() || dx->elem_count() != x.elem_count()) {
      return ctx->Error("dy, x and dx sizes differ");
    }
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchMapGrad(kOp, dy.data<float>(), x.data<float>(), dx->data<float>(),
                            x.elem_count(), p0_, p1_, cuda->stream()));
    return Status::OK();
  }

 private:
  float p0_ = 0.f, p1_ = 0.f;
};

// An index over `out` reading each of `operands` broadcast; error if an
// operand does not broadcast to `out`.
StatusOr<StridedIndex> BroadcastIndex(const KernelContext& ctx, const Shape& out,
                                      const std::vector<const Blob*>& operands) {
  std::vector<std::vector<int64_t>> strides;
  for (const Blob* b : operands) {
    Shape merged;
    if (!math::BroadcastShapes(b->shape(), out, &merged) || merged != out) {
      return ctx.Error("operand ", b->shape(), " does not broadcast to the output ", out);
    }
    strides.push_back(BroadcastStrides(b->shape(), out));
  }
  return MakeIndex(out.dims(), strides);
}

template <SelectOp kOp>
class SelectKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* out = ctx->Output("out");
    ASSIGN_OR_RETURN(StridedIndex index, BroadcastIndex(*ctx, out->shape(), {&x, &y}));
    CUDA_LAUNCH_RETURN_IF_ERROR(*ctx, LaunchSelect(kOp, x.data<float>(), y.data<float>(),
                                                   out->data<float>(), index, cuda->stream()));
    return Status::OK();
  }
};

template <SelectOp kOp>
class SelectGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& dz = ctx->Input("dz");
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* dx = ctx->Output("dx");
    ASSIGN_OR_RETURN(StridedIndex index, BroadcastIndex(*ctx, dx->shape(), {&dz, &x, &y}));
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchSelectGrad(kOp, dz.data<float>(), x.data<float>(), y.data<float>(),
                               dx->data<float>(), index, cuda->stream()));
    return Status::OK();
  }
};

// Registered under the condition dtypes and float32 (whichever input comes
// first in the OpConf is the kernel key); values must be float32.
class WhereKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& cond = ctx->Input("condition");
    const Blob& x = ctx->Input("x");
    const Blob& y = ctx->Input("y");
    Blob* out = ctx->Output("out");
    if (x.dtype() != DT_FLOAT) return ctx->Error("CUDA where takes float32 values");
    CondKind kind;
    switch (cond.dtype()) {
      case DT_BOOL:
      case DT_UINT8:
        kind = CondKind::kU8;
        break;
      case DT_INT32:
        kind = CondKind::kI32;
        break;
      case DT_INT64:
        kind = CondKind::kI64;
        break;
      default:
        return ctx->Error("unsupported condition dtype ", DataTypeName(cond.dtype()));
    }
    ASSIGN_OR_RETURN(StridedIndex index, BroadcastIndex(*ctx, out->shape(), {&cond, &x, &y}));
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchWhere(cond.raw(), kind, x.data<float>(), y.data<float>(), out->data<float>(),
                          index, cuda->stream()));
    return Status::OK();
  }
};

#define REG(op, ...) REGISTER_KERNEL(op, DEVICE_CUDA, DT_FLOAT, __VA_ARGS__)
REG("exp", MapKernel<MapOp::kExp>);
REG("log", MapKernel<MapOp::kLog>);
REG("sqrt", MapKernel<MapOp::kSqrt>);
REG("rsqrt", MapKernel<MapOp::kRsqrt>);
REG("abs", MapKernel<MapOp::kAbs>);
REG("neg", MapKernel<MapOp::kNeg>);
REG("clamp", MapKernel<MapOp::kClamp>);
REG("leaky_relu", MapKernel<MapOp::kLeakyRelu>);
REG("silu", MapKernel<MapOp::kSilu>);
REG("abs_grad", MapGradKernel<MapGradOp::kAbs>);
REG("clamp_grad", MapGradKernel<MapGradOp::kClamp>);
REG("leaky_relu_grad", MapGradKernel<MapGradOp::kLeakyRelu>);
REG("silu_grad", MapGradKernel<MapGradOp::kSilu>);
REG("maximum", SelectKernel<SelectOp::kMax>);
REG("minimum", SelectKernel<SelectOp::kMin>);
REG("maximum_grad", SelectGradKernel<SelectOp::kMax>);
REG("minimum_grad", SelectGradKernel<SelectOp::kMin>);
REG("where", WhereKernel);
#undef REG
REGISTER_KERNEL("where", DEVICE_CUDA, DT_BOOL, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CUDA, DT_UINT8, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CUDA, DT_INT32, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CUDA, DT_INT64, WhereKernel);

}  // namespace
}  // namespace cuda
}  // namespace oflite
