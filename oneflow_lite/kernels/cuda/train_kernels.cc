// CUDA kernels of the train family: fused optimizer updates, clip_scale (and
// its two halves for sharded gradients, square_sum and
// clip_scale_from_square_sum), and the variable initializer. Float32 (variable also float64).
//
// variable: the values are computed on the host by the CPU variable kernel
// (the counter-based initializers are defined bit-exactly there, with
// libm-free log/cos) and copied to the device, so a GPU run starts from the
// very same weights as a CPU run. It runs once at start-up, so the copy cost
// does not matter.
//
// A non-finite `scale` (or clip_scale norm) leaves the model unchanged on the
// device and is reported by the kernel's next call (cuda_kernel_util.h).
#include <cmath>
#include <vector>

#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"
#include "oneflow_lite/kernels/cuda/nn_launch.h"
#include "oneflow_lite/ops/train/lr_schedule.h"
#include "oneflow_lite/ops/train/optimizer_config.h"

namespace oflite {
namespace cuda {
namespace {

enum class Optimizer { kSgd, kMomentum, kAdam };

template <Optimizer kOpt>
class UpdateKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(attrs_, OptimizerAttrsFromOp(*ctx.op));
    return slot_.Init("scale is not finite");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    Blob* model = ctx->MutableInput("model");
    const int64_t n = model->elem_count();
    std::vector<const char*> state = {"model_diff"};
    if (kOpt == Optimizer::kMomentum) state.push_back("momentum");
    if (kOpt == Optimizer::kAdam) state = {"model_diff", "m", "v"};
    for (const char* arg : state) {
      if (ctx->Input(arg).elem_count() != n) {
        return ctx->Error(arg, " has ", ctx->Input(arg).elem_count(), " elements, model has ", n);
      }
    }
    UpdateParams p;
    p.lr = static_cast<float>(LearningRateAt(attrs_.lr, ctx->iteration()));
    p.weight_decay = static_cast<float>(attrs_.weight_decay);
    p.beta = static_cast<float>(attrs_.beta);
    p.beta1 = static_cast<float>(attrs_.beta1);
    p.beta2 = static_cast<float>(attrs_.beta2);
    p.epsilon = static_cast<float>(attrs_.epsilon);
    const double step = static_cast<double>(ctx->iteration() + 1);
    p.bias_correction1 = static_cast<float>(1.0 - std::pow(attrs_.beta1, step));
    p.bias_correction2 = static_cast<float>(1.0 - std::pow(attrs_.beta2, step));
    p.decoupled = attrs_.decoupled;
    const float* scale = ctx->HasInput("scale") ? ctx->Input("scale").data<float>() : nullptr;
    const float* diff = ctx->Input("model_diff").data<float>();
    cudaError_t err = cudaSuccess;
    switch (kOpt) {
      case Optimizer::kSgd:
        err = LaunchSgdUpdate(model->data<float>(), diff, scale, n, p, slot_.device(),
                              cuda->stream());
        break;
      case Optimizer::kMomentum:
        err = LaunchMomentumUpdate(model->data<float>(), diff,
                                   ctx->MutableInput("momentum")->data<float>(), scale, n, p,
                                   slot_.device(), cuda->stream());
        break;
      case Optimizer::kAdam:
        err = LaunchAdamUpdate(model->data<float>(), diff, ctx->MutableInput("m")->data<float>(),
                               ctx->MutableInput("v")->data<float>(), scale, n, p,
                               slot_.device(), cuda->stream());
        break;
    }
    return LaunchStatus(*ctx, err, "optimizer update launcher");
  }

 private:
  OptimizerAttrs attrs_;
};

// The clipping factor's common part: the max_norm attribute and a device
// float64 accumulator for the sum of squares.
class ClipKernelBase : public KernelWithErrorSlot {
 public:
  ~ClipKernelBase() override {
    if (accumulator_ != nullptr) cudaFree(accumulator_);
  }
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(max_norm_, ctx.attrs().GetFloat("max_norm"));
    if (!(max_norm_ > 0.0)) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): max_norm must be > 0");
    }
    if (ctx.device != nullptr) {
      CUDA_RETURN_IF_ERROR(cudaSetDevice(ctx.device->device_index()));
    }
    CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&accumulator_), sizeof(double)));
    return slot_.Init("gradient global norm is not finite");
  }

 protected:
  // Writes the factor from the accumulated sum to out.
  Status Finish(KernelContext* ctx, const CudaDeviceContext* cuda) {
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchClipScaleFinish(accumulator_, ctx->Output("out")->data<float>(), max_norm_,
                                    slot_.device(), cuda->stream()));
    return Status::OK();
  }

  double max_norm_ = 1.0;
  double* accumulator_ = nullptr;
};

class ClipScaleKernel final : public ClipKernelBase {
 public:
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(accumulator_, 0, sizeof(double), cuda->stream()));
    for (int k = 0; k < ctx->InputCount("in"); ++k) {
      const Blob& in = ctx->Input("in", k);
      CUDA_LAUNCH_RETURN_IF_ERROR(
          *ctx, LaunchSumSquares(in.data<float>(), in.elem_count(), accumulator_, cuda->stream()));
    }
    return Finish(ctx, cuda);
  }
};

// square_sum: the float64 sum of squares of every input (a device holding
// slices: the partial sum of its slices), accumulated in the output itself.
class SquareSumKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    double* out = ctx->Output("out")->data<double>();
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out, 0, sizeof(double), cuda->stream()));
    for (int k = 0; k < ctx->InputCount("in"); ++k) {
      const Blob& in = ctx->Input("in", k);
      CUDA_LAUNCH_RETURN_IF_ERROR(
          *ctx, LaunchSumSquares(in.data<float>(), in.elem_count(), out, cuda->stream()));
    }
    return Status::OK();
  }
};

// clip_scale_from_square_sum: the clipping factor from square_sum results
// (added in input order, as on the CPU), float32 out.
class ClipScaleFromSquareSumKernel final : public ClipKernelBase {
 public:
  Status Init(const KernelInitContext& ctx) override {
    if (ctx.Output("out").dtype != DT_FLOAT) {
      return InvalidArgumentError("op '", ctx.op->name(),
                                  "' (clip_scale_from_square_sum): the CUDA kernel writes a "
                                  "float32 factor, the op asks for ",
                                  DataTypeName(ctx.Output("out").dtype));
    }
    return ClipKernelBase::Init(ctx);
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(accumulator_, 0, sizeof(double), cuda->stream()));
    for (int k = 0; k < ctx->InputCount("square_sum"); ++k) {
      CUDA_LAUNCH_RETURN_IF_ERROR(
          *ctx, LaunchAddScalar(ctx->Input("square_sum", k).data<double>(), accumulator_,
                                cuda->stream()));
    }
    return Finish(ctx, cuda);
  }
};

// Runs the CPU variable kernel into a host buffer and copies it over.
class VariableKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    KernelInitContext host = ctx;
    host.device = &cpu_;
    const TensorDesc& out = ctx.Output("out");
    ASSIGN_OR_RETURN(cpu_kernel_, CreateAndInitKernel(host, DEVICE_CPU, out.dtype));
    buffer_.resize(static_cast<size_t>(out.ByteSize()));
    return Status::OK();
  }
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    Blob* out = ctx->Output("out");
    if (static_cast<size_t>(out->ByteSize()) != buffer_.size()) {
      return ctx->Error("out ", out->shape(), " differs from the planned size");
    }
    Blob host_out(buffer_.data(), out->desc());
    KernelContext host_ctx(ctx->op(), &cpu_, ctx->iteration());
    host_ctx.BindOutput("out", &host_out);
    RETURN_IF_ERROR(cpu_kernel_->Forward(&host_ctx));
    if (!buffer_.empty()) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out->raw(), buffer_.data(), buffer_.size(),
                                           cudaMemcpyHostToDevice, cuda->stream()));
      // The host buffer is reused by the next call: wait for the copy.
      RETURN_IF_ERROR(cuda->Synchronize());
    }
    return Status::OK();
  }

 private:
  CpuDeviceContext cpu_;
  std::unique_ptr<Kernel> cpu_kernel_;
  std::vector<char> buffer_;
};

REGISTER_KERNEL("sgd_update", DEVICE_CUDA, DT_FLOAT, UpdateKernel<Optimizer::kSgd>);
REGISTER_KERNEL("momentum_update", DEVICE_CUDA, DT_FLOAT, UpdateKernel<Optimizer::kMomentum>);
REGISTER_KERNEL("adam_update", DEVICE_CUDA, DT_FLOAT, UpdateKernel<Optimizer::kAdam>);
REGISTER_KERNEL("clip_scale", DEVICE_CUDA, DT_FLOAT, ClipScaleKernel);
REGISTER_KERNEL("square_sum", DEVICE_CUDA, DT_FLOAT, SquareSumKernel);
// Looked up by its float64 inputs; also under float32, the factor it
// writes (tools/gpu's coverage check asks every op for a float32 kernel).
REGISTER_KERNEL("clip_scale_from_square_sum", DEVICE_CUDA, DT_DOUBLE,
                ClipScaleFromSquareSumKernel);
REGISTER_KERNEL("clip_scale_from_square_sum", DEVICE_CUDA, DT_FLOAT,
                ClipScaleFromSquareSumKernel);
REGISTER_KERNEL("variable", DEVICE_CUDA, DT_FLOAT, VariableKernel);
REGISTER_KERNEL("variable", DEVICE_CUDA, DT_DOUBLE, VariableKernel);

}  // namespace
}  // namespace cuda
}  // namespace oflite
