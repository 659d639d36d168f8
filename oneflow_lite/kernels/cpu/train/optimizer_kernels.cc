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
// (kernels/cpu/vec/vec.h, tested against these plain loops). Elements are
// split over the cpu_threads OpenMP team (ParallelElements,
// kernels/cpu/parallel_rows.h); each is updated on its own, so the result
// does not depend on the thread count.
//
// clip_scale (and square_sum, its first half for sharded gradients) sums
// the squares of its inputs over fixed blocks of
// kNormBlock elements (a block never spans two inputs), the blocks spread
// over the team, each block vectorized (16 partial sums in double, every
// square exact), and adds the block sums in input order: the same bits on
// any thread count and instruction set.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "oneflow_lite/kernels/cpu/parallel_rows.h"
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
    ParallelElements(model_blob->elem_count(), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        vec::Active().sgd(model + begin, diff + begin, end - begin, scale, lr, decay);
      } else {
        for (int64_t i = begin; i < end; ++i) {
          const T grad = scale * diff[i] + decay * model[i];
          model[i] -= lr * grad;
        }
      }
    });
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
    ParallelElements(model_blob->elem_count(), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        vec::Active().momentum(model + begin, momentum + begin, diff + begin, end - begin, scale,
                               lr, decay, beta);
      } else {
        for (int64_t i = begin; i < end; ++i) {
          const T grad = scale * diff[i] + decay * model[i];
          momentum[i] = beta * momentum[i] + grad;
          model[i] -= lr * momentum[i];
        }
      }
    });
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
    ParallelElements(model_blob->elem_count(), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        vec::Active().adam(model + begin, m + begin, v + begin, diff + begin, end - begin, scale,
                           lr, beta1, beta2, epsilon, correction1, correction2, coupled_decay,
                           decoupled_decay);
      } else {
        for (int64_t i = begin; i < end; ++i) {
          const T grad = scale * diff[i] + coupled_decay * model[i];
          m[i] = beta1 * m[i] + (T(1) - beta1) * grad;
          v[i] = beta2 * v[i] + (T(1) - beta2) * grad * grad;
          const T m_hat = m[i] / correction1;
          const T v_hat = v[i] / correction2;
          model[i] -= lr * (m_hat / (std::sqrt(v_hat) + epsilon) + decoupled_decay * model[i]);
        }
      }
    });
    return Status::OK();
  }
};

// Elements per block of clip_scale's sum (see the file comment): about 2 us
// of work, and few enough blocks that adding their sums costs nothing.
constexpr int64_t kNormBlock = 4096;

// sum(x[i]^2) over [0, n) in double. float32: the vec loop (16 lanes);
// float64: the same lanes here.
template <typename T>
double SumOfSquares(const T* x, int64_t n) {
  constexpr int kLanes = 16;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += static_cast<double>(x[i + k]) * x[i + k];
  }
  for (int k = 0; i + k < n; ++k) lanes[k] += static_cast<double>(x[i + k]) * x[i + k];
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int k = 0; k < width; ++k) lanes[k] += lanes[k + width];
  }
  return lanes[0];
}
template <>
double SumOfSquares<float>(const float* x, int64_t n) {
  return vec::Active().sum_of_squares(x, n);
}

// The sum of the squares of every "in" of a kernel, in double: blocks of
// kNormBlock elements spread over the team, block sums added in input order
// (the same bits on any thread count). A non-finite running sum is an error
// naming the first input after which it is not finite.
template <typename T>
class BlockedSquareSum {
 public:
  StatusOr<double> Sum(KernelContext* ctx) {
    // The vectors keep their capacity: steady-state iterations allocate nothing.
    const int inputs = ctx->InputCount("in");
    data_.resize(inputs);
    blocks_.clear();
    for (int k = 0; k < inputs; ++k) {
      const Blob& in = ctx->Input("in", k);
      data_[k] = in.data<T>();
      for (int64_t begin = 0; begin < in.elem_count(); begin += kNormBlock) {
        blocks_.push_back({k, begin, std::min(in.elem_count(), begin + kNormBlock)});
      }
    }
    sums_.resize(blocks_.size());
    const int64_t block_count = static_cast<int64_t>(blocks_.size());
    ParallelRows(block_count, kNormBlock, [&](int64_t first, int64_t last) {
      for (int64_t b = first; b < last; ++b) {
        const Block& block = blocks_[b];
        sums_[b] = SumOfSquares<T>(data_[block.input] + block.begin, block.end - block.begin);
      }
    });
    double sum_of_squares = 0.0;
    int64_t b = 0;
    for (int k = 0; k < inputs; ++k) {
      for (; b < block_count && blocks_[b].input == k; ++b) sum_of_squares += sums_[b];
      if (!std::isfinite(sum_of_squares)) {
        return ctx->Error("gradient global norm is not finite (input in[", k, "])");
      }
    }
    return sum_of_squares;
  }

 private:
  struct Block {
    int input;
    int64_t begin, end;
  };

  std::vector<const T*> data_;
  std::vector<Block> blocks_;
  std::vector<double> sums_;
};

// min(1, max_norm / (sqrt(sum_of_squares) + 1e-6)): the clipping factor.
double ClipFactor(double max_norm, double sum_of_squares) {
  return std::min(1.0, max_norm / (std::sqrt(sum_of_squares) + 1e-6));
}

StatusOr<double> MaxNormAttr(const KernelInitContext& ctx) {
  ASSIGN_OR_RETURN(double max_norm, ctx.attrs().GetFloat("max_norm"));
  if (!(max_norm > 0.0)) {
    return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                "): max_norm must be > 0");
  }
  return max_norm;
}

// out = min(1, max_norm / (global_norm + 1e-6)), the norm over every input
// accumulated in double.
template <typename T>
class ClipScaleKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(max_norm_, MaxNormAttr(ctx));
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const double sum_of_squares, sum_.Sum(ctx));
    ctx->Output("out")->data<T>()[0] = static_cast<T>(ClipFactor(max_norm_, sum_of_squares));
    return Status::OK();
  }

 private:
  double max_norm_ = 1.0;
  BlockedSquareSum<T> sum_;
};

// square_sum: clip_scale's sum of squares alone, as a float64 scalar (on a
// device holding slices of the inputs: the partial sum of its slices).
template <typename T>
class SquareSumKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const double sum_of_squares, sum_.Sum(ctx));
    ctx->Output("out")->data<double>()[0] = sum_of_squares;
    return Status::OK();
  }

 private:
  BlockedSquareSum<T> sum_;
};

// clip_scale_from_square_sum: the clipping factor from square_sum results
// (added in input order), in the op's `dtype`.
class ClipScaleFromSquareSumKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(max_norm_, MaxNormAttr(ctx));
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    double sum_of_squares = 0.0;
    for (int k = 0; k < ctx->InputCount("square_sum"); ++k) {
      sum_of_squares += ctx->Input("square_sum", k).data<double>()[0];
    }
    if (!std::isfinite(sum_of_squares)) {
      return ctx->Error("gradient global norm is not finite (sum of squares ", sum_of_squares, ")");
    }
    const double factor = ClipFactor(max_norm_, sum_of_squares);
    Blob* out = ctx->Output("out");
    if (out->dtype() == DT_DOUBLE) {
      out->data<double>()[0] = factor;
    } else {
      out->data<float>()[0] = static_cast<float>(factor);
    }
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
REGISTER_KERNEL("square_sum", DEVICE_CPU, DT_FLOAT, SquareSumKernel<float>);
REGISTER_KERNEL("square_sum", DEVICE_CPU, DT_DOUBLE, SquareSumKernel<double>);
// Keyed by its first input's dtype, float64; it writes the `dtype` attribute's.
REGISTER_KERNEL("clip_scale_from_square_sum", DEVICE_CPU, DT_DOUBLE,
                ClipScaleFromSquareSumKernel);

}  // namespace
}  // namespace oflite
