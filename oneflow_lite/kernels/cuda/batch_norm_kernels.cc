// CUDA batch_norm and batch_norm_grad (float32); launchers in
// batch_norm_launch.h, formulas in oneflow_lite/ops/nn/batch_norm_ops.cc.
// Extents come from the bound blobs, so split (physical) shapes run
// unchanged.
#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cuda/batch_norm_launch.h"
#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"

namespace oflite {
namespace cuda {
namespace {

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

REGISTER_KERNEL("batch_norm", DEVICE_CUDA, DT_FLOAT, BatchNormKernel);
REGISTER_KERNEL("batch_norm_grad", DEVICE_CUDA, DT_FLOAT, BatchNormGradKernel);

}  // namespace
}  // namespace cuda
}  // namespace oflite
