// CPU kernels of the optimizer update ops and clip_scale (docs/ops.md,
// "train family"). Each update reads the lr of the current iteration from the
// schedule, multiplies the gradient by the optional `scale` input (global-norm
// clipping) and writes the model and its state in place:
//   g = scale * model_diff (+ weight_decay * model, except AdamW)
//   sgd:      model -= lr * g
//   momentum: momentum = beta * momentum + g;  model -= lr * momentum
//   adam:     m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//             t = iteration + 1;  m^ = m / (1 - beta1^t);  v^ = v / (1 - beta2^t)
//             model -= lr * (m^ / (sqrt(v^) + epsilon) + [AdamW] weight_decay * model)
// The float32 loops run the vectorized, ISA-dispatched versions
// (kernels/cpu/vec/vec.h, tested against these plain loops).
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "oneflow_lite/kernels/cpu/vec/vec.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/train/lr_schedule.h"
#include "oneflow_lite/ops/train/optimizer_config.h"

namespace oflite {
namespace {

// Shared by the update kernels: attributes, the scale input, size checks.
template <typename T>
class UpdateKernelBase : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(attrs_, OptimizerAttrsFromOp(*ctx.op));
    return Status::OK();
  }

 protected:
  double LearningRate(const KernelContext& ctx) const {
    return LearningRateAt(attrs_.lr, ctx.iteration());
  }

  // 1 without a scale input; an error if the scale is not finite.
  StatusOr<T> Scale(const KernelContext& ctx) const {
    if (!ctx.HasInput("scale")) return T(1);
    const T scale = ctx.Input("scale").data<T>()[0];
    if (!std::isfinite(scale)) return ctx.Error("scale is not finite (", scale, ")");
    return scale;
  }

  // Every blob of `args` must have as many elements as the model.
  Status CheckSizes(KernelContext* ctx, std::initializer_list<const char*> args) const {
    const int64_t count = ctx->Input("model").elem_count();
    for (const char* arg : args) {
      if (ctx->Input(arg).elem_count() != count) {
        return ctx->Error(arg, " has ", ctx->Input(arg).elem_count(), " elements, model has ",
                          count);
      }
    }
    return Status::OK();
  }

  OptimizerAttrs attrs_;
};

template <typename T>
class SgdUpdateKernel final : public UpdateKernelBase<T> {
 public:
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(this->CheckSizes(ctx, {"model_diff"}));
    ASSIGN_OR_RETURN(const T scale, this->Scale(*ctx));
    const T lr = static_cast<T>(this->LearningRate(*ctx));
    const T decay = static_cast<T>(this->attrs_.weight_decay);
    Blob* model_blob = ctx->MutableInput("model");
    T* model = model_blob->data<T>();
    const T* diff = ctx->Input("model_diff").data<T>();
    if constexpr (std::is_same_v<T, float>) {
      vec::Active().sgd(model, diff, model_blob->elem_count(), scale, lr, decay);
      return Status::OK();
    }
    for (int64_t i = 0; i < model_blob->elem_count(); ++i) {
      const T grad = scale * diff[i] + decay * model[i];
      model[i] -= lr * grad;
    }
    return Status::OK();
  }
};

template <typename T>
class MomentumUpdateKernel final : public UpdateKernelBase<T> {
 public:
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(this->CheckSizes(ctx, {"model_diff", "momentum"}));
    ASSIGN_OR_RETURN(const T scale, this->Scale(*ctx));
    const T lr = static_cast<T>(this->LearningRate(*ctx));
    const T decay = static_cast<T>(this->attrs_.weight_decay);
    const T beta = static_cast<T>(this->attrs_.beta);
    Blob* model_blob = ctx->MutableInput("model");
    T* model = model_blob->data<T>();
    T* momentum = ctx->MutableInput("momentum")->data<T>();
    const T* diff = ctx->Input("model_diff").data<T>();
    if constexpr (std::is_same_v<T, float>) {
      vec::Active().momentum(model, momentum, diff, model_blob->elem_count(), scale, lr, decay,
                             beta);
      return Status::OK();
    }
    for (int64_t i = 0; i < model_blob->elem_count(); ++i) {
      const T grad = scale * diff[i] + decay * model[i];
      momentum[i] = beta * momentum[i] + grad;
      model[i] -= lr * momentum[i];
    }
    return Status::OK();
  }
};

template <typename T>
class AdamUpdateKernel final : public UpdateKernelBase<T> {
 public:
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(this->CheckSizes(ctx, {"model_diff", "m", "v"}));
    ASSIGN_OR_RETURN(const T scale, this->Scale(*ctx));
    const OptimizerAttrs& a = this->attrs_;
    const T lr = static_cast<T>(this->LearningRate(*ctx));
    const double step = static_cast<double>(ctx->iteration() + 1);
    const T correction1 = static_cast<T>(1.0 - std::pow(a.beta1, step));
    const T correction2 = static_cast<T>(1.0 - std::pow(a.beta2, step));
    const T beta1 = static_cast<T>(a.beta1);
    const T beta2 = static_cast<T>(a.beta2);
    const T epsilon = static_cast<T>(a.epsilon);
    const T coupled_decay = static_cast<T>(a.decoupled ? 0.0 : a.weight_decay);
    const T decoupled_decay = static_cast<T>(a.decoupled ? a.weight_decay : 0.0);
    Blob* model_blob = ctx->MutableInput("model");
    T* model = model_blob->data<T>();
    T* m = ctx->MutableInput("m")->data<T>();
    T* v = ctx->MutableInput("v")->data<T>();
    const T* diff = ctx->Input("model_diff").data<T>();
    if constexpr (std::is_same_v<T, float>) {
      vec::Active().adam(model, m, v, diff, model_blob->elem_count(), scale, lr, beta1, beta2,
                         epsilon, correction1, correction2, coupled_decay, decoupled_decay);
      return Status::OK();
    }
    for (int64_t i = 0; i < model_blob->elem_count(); ++i) {
      const T grad = scale * diff[i] + coupled_decay * model[i];
      m[i] = beta1 * m[i] + (T(1) - beta1) * grad;
      v[i] = beta2 * v[i] + (T(1) - beta2) * grad * grad;
      const T m_hat = m[i] / correction1;
      const T v_hat = v[i] / correction2;
      model[i] -= lr * (m_hat / (std::sqrt(v_hat) + epsilon) + decoupled_decay * model[i]);
    }
    return Status::OK();
  }
};

// out = min(1, max_norm / (global_norm + 1e-6)), the norm over every input
// accumulated in double. A non-finite norm is an error (training diverged).
template <typename T>
class ClipScaleKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(max_norm_, ctx.attrs().GetFloat("max_norm"));
    if (!(max_norm_ > 0.0)) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (clip_scale): max_norm must be > 0");
    }
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    double sum_of_squares = 0.0;
    for (int k = 0; k < ctx->InputCount("in"); ++k) {
      const Blob& in = ctx->Input("in", k);
      const T* data = in.data<T>();
      for (int64_t i = 0; i < in.elem_count(); ++i) {
        sum_of_squares += static_cast<double>(data[i]) * static_cast<double>(data[i]);
      }
      if (!std::isfinite(sum_of_squares)) {
        return ctx->Error("gradient global norm is not finite (input in[", k, "])");
      }
    }
    const double norm = std::sqrt(sum_of_squares);
    ctx->Output("out")->data<T>()[0] = static_cast<T>(std::min(1.0, max_norm_ / (norm + 1e-6)));
    return Status::OK();
  }

 private:
  double max_norm_ = 1.0;
};

REGISTER_KERNEL("sgd_update", DEVICE_CPU, DT_FLOAT, SgdUpdateKernel<float>);
REGISTER_KERNEL("sgd_update", DEVICE_CPU, DT_DOUBLE, SgdUpdateKernel<double>);
REGISTER_KERNEL("momentum_update", DEVICE_CPU, DT_FLOAT, MomentumUpdateKernel<float>);
REGISTER_KERNEL("momentum_update", DEVICE_CPU, DT_DOUBLE, MomentumUpdateKernel<double>);
REGISTER_KERNEL("adam_update", DEVICE_CPU, DT_FLOAT, AdamUpdateKernel<float>);
REGISTER_KERNEL("adam_update", DEVICE_CPU, DT_DOUBLE, AdamUpdateKernel<double>);
REGISTER_KERNEL("clip_scale", DEVICE_CPU, DT_FLOAT, ClipScaleKernel<float>);
REGISTER_KERNEL("clip_scale", DEVICE_CPU, DT_DOUBLE, ClipScaleKernel<double>);

}  // namespace
}  // namespace oflite
