// CUDA kernels (float32) of the ops added with issue 18 (see
// extra_launch.h): unary math and gradients, maximum/minimum(+grad), where,
// binary cross-entropy with logits(+grad), one_hot, gather(+grad),
// adaptive_avg_pool2d(+grad), batch_norm(+grad). Extents come from the bound
// blobs, so split (physical) shapes run unchanged.
#include <limits>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"
#include "oneflow_lite/kernels/cuda/extra_launch.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace cuda {
namespace {

// Attribute parameters of the map ops: clamp's bounds, leaky_relu's alpha.
void MapParams(const AttrView& attrs, float* p0, float* p1) {
  const float inf = std::numeric_limits<float>::infinity();
  if (attrs.Has("alpha") || !(attrs.Has("min") || attrs.Has("max"))) {
    *p0 = static_cast<float>(attrs.GetFloatOr("alpha", 0.01));
    *p1 = 0.f;
    return;
  }
  *p0 = attrs.Has("min") ? static_cast<float>(attrs.GetFloatOr("min", 0)) : -inf;
  *p1 = attrs.Has("max") ? static_cast<float>(attrs.GetFloatOr("max", 0)) : inf;
}

template <MapOp kOp>
class MapKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    MapParams(ctx.attrs(), &p0_, &p1_);
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
    MapParams(ctx.attrs(), &p0_, &p1_);
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

// Strides of `operand` read along `out`'s dims with numpy broadcasting.
std::vector<int64_t> BroadcastStrides(const Shape& operand, const Shape& out) {
  std::vector<int64_t> strides(out.rank(), 0);
  const std::vector<int64_t> contiguous = RowMajorStrides(operand);
  const int64_t shift = out.rank() - operand.rank();
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (operand.dim(i) != 1) strides[i + shift] = contiguous[i];
  }
  return strides;
}

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

class BceKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const Blob& t = ctx->Input("target");
    Blob* out = ctx->Output("out");
    if (t.elem_count() != x.elem_count() || out->elem_count() != x.elem_count()) {
      return ctx->Error("x, target and out sizes differ");
    }
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchBce(x.data<float>(), t.data<float>(), out->data<float>(), x.elem_count(),
                        cuda->stream()));
    return Status::OK();
  }
};

class BceGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const int64_t n = x.elem_count();
    if (ctx->Input("dy").elem_count() != n || ctx->Input("target").elem_count() != n ||
        ctx->Output("dx")->elem_count() != n || ctx->Output("dtarget")->elem_count() != n) {
      return ctx->Error("dy, x, target, dx and dtarget sizes differ");
    }
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchBceGrad(ctx->Input("dy").data<float>(), x.data<float>(),
                            ctx->Input("target").data<float>(), ctx->Output("dx")->data<float>(),
                            ctx->Output("dtarget")->data<float>(), n, cuda->stream()));
    return Status::OK();
  }
};

IndexArray IndicesOf(const Blob& blob) {
  IndexArray a;
  a.data = blob.raw();
  a.wide = blob.dtype() == DT_INT64;
  return a;
}

Status CheckIndices(const KernelContext& ctx, const Blob& blob) {
  if (blob.dtype() != DT_INT32 && blob.dtype() != DT_INT64) {
    return ctx.Error("indices must be int32 or int64, got ", DataTypeName(blob.dtype()));
  }
  return Status::OK();
}

// Keyed by the indices' dtype; float32 output only on CUDA.
class OneHotKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("index outside [0, depth)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& indices = ctx->Input("indices");
    RETURN_IF_ERROR(CheckIndices(*ctx, indices));
    Blob* out = ctx->Output("out");
    if (out->dtype() != DT_FLOAT) return ctx->Error("CUDA one_hot writes float32 only");
    const int64_t depth = out->shape().dim(out->shape().rank() - 1);
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchOneHot(IndicesOf(indices), out->data<float>(), indices.elem_count(), depth,
                           static_cast<float>(ctx->attrs().GetFloatOr("on_value", 1.0)),
                           static_cast<float>(ctx->attrs().GetFloatOr("off_value", 0.0)),
                           slot_.device(), cuda->stream()));
    return Status::OK();
  }
};

int64_t RowSize(const Shape& rows) {
  int64_t size = 1;
  for (int64_t i = 1; i < rows.rank(); ++i) size *= rows.dim(i);
  return size;
}

// gather is an embedding lookup with V = x.shape[0] and D = the row size.
class GatherKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("index outside [0, rows of x)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const Blob& indices = ctx->Input("indices");
    RETURN_IF_ERROR(CheckIndices(*ctx, indices));
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx,
        LaunchEmbedding(x.data<float>(), IndicesOf(indices), ctx->Output("out")->data<float>(),
                        indices.elem_count(), x.shape().dim(0), RowSize(x.shape()), slot_.device(),
                        cuda->stream()));
    return Status::OK();
  }
};

class GatherGradKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("index outside [0, rows of x)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& indices = ctx->Input("indices");
    RETURN_IF_ERROR(CheckIndices(*ctx, indices));
    Blob* dx = ctx->Output("dx");
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchEmbeddingGrad(ctx->Input("dy").data<float>(), IndicesOf(indices),
                                  dx->data<float>(), indices.elem_count(), dx->shape().dim(0),
                                  RowSize(dx->shape()), slot_.device(), cuda->stream()));
    return Status::OK();
  }
};

template <bool kGrad>
class AdaptivePoolKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Shape& in = kGrad ? ctx->Output("dx")->shape() : ctx->Input("x").shape();
    const Shape& out = kGrad ? ctx->Input("dy").shape() : ctx->Output("y")->shape();
    if (in.rank() != 4 || out.rank() != 4 || in.dim(0) != out.dim(0) || in.dim(1) != out.dim(1) ||
        in.dim(2) < 1 || in.dim(3) < 1) {
      return ctx->Error("blob shapes disagree: input ", in, ", pooled ", out);
    }
    const int64_t planes = in.dim(0) * in.dim(1);
    cudaError_t err =
        kGrad ? LaunchAdaptiveAvgPoolGrad(ctx->Input("dy").data<float>(),
                                          ctx->Output("dx")->data<float>(), planes, in.dim(2),
                                          in.dim(3), out.dim(2), out.dim(3), cuda->stream())
              : LaunchAdaptiveAvgPool(ctx->Input("x").data<float>(),
                                      ctx->Output("y")->data<float>(), planes, in.dim(2), in.dim(3),
                                      out.dim(2), out.dim(3), cuda->stream());
    return LaunchStatus(*ctx, err, "adaptive pooling launcher");
  }
};

ChannelDims DimsOf(const Shape& x) {
  ChannelDims d;
  d.n = x.dim(0);
  d.c = x.dim(1);
  for (int64_t i = 2; i < x.rank(); ++i) d.s *= x.dim(i);
  return d;
}

class BatchNormKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    if (x.shape().rank() < 2 || ctx->Input("gamma").elem_count() != x.shape().dim(1)) {
      return ctx->Error("blob shapes disagree: x ", x.shape(), ", gamma ",
                        ctx->Input("gamma").shape());
    }
    const ChannelDims dims = DimsOf(x.shape());
    float* mean = ctx->Output("mean")->data<float>();
    float* inv = ctx->Output("inv_variance")->data<float>();
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx,
        LaunchBatchNormStats(x.data<float>(), dims, ctx->attrs().GetBoolOr("training", true),
                             static_cast<float>(ctx->attrs().GetFloatOr("momentum", 0.9)),
                             static_cast<float>(ctx->attrs().GetFloatOr("epsilon", 1e-5)), mean,
                             inv, ctx->MutableInput("moving_mean")->data<float>(),
                             ctx->MutableInput("moving_variance")->data<float>(), cuda->stream()));
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchBatchNormApply(x.data<float>(), mean, inv, ctx->Input("gamma").data<float>(),
                                   ctx->Input("beta").data<float>(),
                                   ctx->Output("y")->data<float>(), dims, cuda->stream()));
    return Status::OK();
  }
};

class BatchNormGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    if (x.shape().rank() < 2 || ctx->Input("dy").shape() != x.shape()) {
      return ctx->Error("blob shapes disagree: x ", x.shape(), ", dy ", ctx->Input("dy").shape());
    }
    const nn::NormGradBlobs<float> b = nn::NormGradBlobsOf<float>(ctx);
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchBatchNormGrad(b.dy, b.x, b.mean, b.inv_variance, b.gamma, b.dmean,
                                  b.dinv_variance, ctx->attrs().GetBoolOr("training", true), b.dx,
                                  b.dgamma, b.dbeta, DimsOf(x.shape()), cuda->stream()));
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
REG("binary_cross_entropy_with_logits", BceKernel);
REG("binary_cross_entropy_with_logits_grad", BceGradKernel);
REG("gather", GatherKernel);
REG("gather_grad", GatherGradKernel);
REG("adaptive_avg_pool2d", AdaptivePoolKernel<false>);
REG("adaptive_avg_pool2d_grad", AdaptivePoolKernel<true>);
REG("batch_norm", BatchNormKernel);
REG("batch_norm_grad", BatchNormGradKernel);
#undef REG
REGISTER_KERNEL("where", DEVICE_CUDA, DT_BOOL, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CUDA, DT_UINT8, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CUDA, DT_INT32, WhereKernel);
REGISTER_KERNEL("where", DEVICE_CUDA, DT_INT64, WhereKernel);
// one_hot's key is its indices' dtype; the float32 entry only keeps the
// "every op has a float32 CUDA kernel" coverage check honest (the kernel
// reads the indices' dtype from the blob).
REGISTER_KERNEL("one_hot", DEVICE_CUDA, DT_INT32, OneHotKernel);
REGISTER_KERNEL("one_hot", DEVICE_CUDA, DT_INT64, OneHotKernel);
REGISTER_KERNEL("one_hot", DEVICE_CUDA, DT_FLOAT, OneHotKernel);

}  // namespace
}  // namespace cuda
}  // namespace oflite
