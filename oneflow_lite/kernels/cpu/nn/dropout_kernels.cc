// CPU dropout and dropout_grad. The mask comes from nn::DropoutUniform keyed
// by (attr seed, iteration, parallel_id, element index); kept elements are
// scaled by 1 / (1 - rate).
#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/nn/nn_util.h"

namespace oflite {
namespace nn {
namespace {

class DropoutKernelBase : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    auto rate = DropoutRate(ctx.attrs());
    if (!rate.ok()) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): ", rate.status().message());
    }
    rate_ = *rate;
    seed_ = ctx.attrs().GetIntOr("seed", 0);
    parallel_id_ = ctx.parallel_id;
    return Status::OK();
  }

 protected:
  double rate_ = 0;
  int64_t seed_ = 0;
  int64_t parallel_id_ = 0;
};

template <typename T>
class DropoutKernel final : public DropoutKernelBase {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x_blob = ctx->Input("x");
    const T* x = x_blob.data<T>();
    T* y = ctx->Output("y")->data<T>();
    uint8_t* mask = ctx->Output("mask")->data<uint8_t>();
    const T scale = T(1.0 / (1.0 - rate_));
    for (int64_t i = 0; i < x_blob.elem_count(); ++i) {
      const bool keep = DropoutUniform(seed_, ctx->iteration(), parallel_id_, i) >= rate_;
      mask[i] = keep ? 1 : 0;
      y[i] = keep ? x[i] * scale : T(0);
    }
    return Status::OK();
  }
};

template <typename T>
class DropoutGradKernel final : public DropoutKernelBase {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& dy_blob = ctx->Input("dy");
    const T* dy = dy_blob.data<T>();
    const uint8_t* mask = ctx->Input("mask").data<uint8_t>();
    T* dx = ctx->Output("dx")->data<T>();
    const T scale = T(1.0 / (1.0 - rate_));
    for (int64_t i = 0; i < dy_blob.elem_count(); ++i) dx[i] = mask[i] ? dy[i] * scale : T(0);
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("dropout", DropoutKernel);
REGISTER_NN_CPU_KERNELS("dropout_grad", DropoutGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
