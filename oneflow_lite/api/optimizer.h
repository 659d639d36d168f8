// Optimizers: user-facing descriptions (Sgd, Momentum, Adam, AdamW, learning
// rate schedules) and the optimizer pass that turns variable gradients into
// update ops.
//
// The pass reads job.conf.train.optimizer (an OptimizerConf) and, for every
// trainable variable with a gradient (from Autodiff), adds:
//   - state variables (non-trainable, zero-initialized, same shape, dtype,
//     placement and SBP hint as the model): "<var>-momentum" for Momentum,
//     "<var>-m" and "<var>-v" for Adam/AdamW;
//   - one update op "<var>-update" (sgd_update / momentum_update /
//     adam_update, docs/ops.md train table) carrying the lr schedule attrs
//     (lr_type, base_lr, step_size, gamma, warmup_iters, total_iters, min_lr)
//     and weight_decay, marked is_optimizer, with mutable_input filled;
//   - a control_input on the update from every other op that reads the
//     variable, so the update never overtakes a read of the same iteration;
//   - with clip_global_norm > 0: one `clip_scale` op "optimizer-clip_scale"
//     over every gradient, whose scalar output feeds each update's `scale`.
// Pure function; thread-compatible.
#ifndef ONEFLOW_LITE_API_OPTIMIZER_H_
#define ONEFLOW_LITE_API_OPTIMIZER_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

// Learning-rate schedule; total_iters is filled from the job at Build.
struct LrScheduleOptions {
  LrScheduleType type = LR_CONSTANT;
  int64_t step_size = 0;  // LR_STEP: lr * gamma^(floor(iter / step_size))
  double gamma = 1.0;
  int64_t warmup_iters = 0;  // LR_COSINE: linear warm-up, then cosine decay
  double min_lr = 0.0;

  static LrScheduleOptions Constant() { return {}; }
  static LrScheduleOptions Step(int64_t step_size, double gamma);
  static LrScheduleOptions Cosine(int64_t warmup_iters = 0, double min_lr = 0.0);
};

struct Sgd {
  double learning_rate = 0.01;
  double weight_decay = 0.0;  // L2, added to the gradient
};

struct Momentum {
  double learning_rate = 0.01;
  double momentum = 0.9;
  double weight_decay = 0.0;
};

struct Adam {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.0;  // L2, added to the gradient
};

struct AdamW {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.01;  // decoupled
};

using Optimizer = std::variant<Sgd, Momentum, Adam, AdamW>;

struct MinimizeOptions {
  LrScheduleOptions schedule;
  double clip_global_norm = 0.0;  // 0 = no clipping
  // Weight decay only for variables of rank >= this (0: every variable; 2:
  // matrices and tables, not biases or LayerNorm parameters).
  int64_t weight_decay_min_rank = 0;
};

// The OptimizerConf recorded in the Job (lr.total_iters left 0).
OptimizerConf MakeOptimizerConf(const Optimizer& optimizer, const MinimizeOptions& options);

// Validates an OptimizerConf (positive lr, betas in [0, 1), ...); errors
// name the field.
Status ValidateOptimizerConf(const OptimizerConf& conf);

// Adds state variables and update ops as described above. `variable_grads`
// maps trainable variable op names to gradient lbns (AutodiffResult).
StatusOr<Job> AddOptimizerOps(const Job& job,
                              const std::map<std::string, std::string>& variable_grads);

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_OPTIMIZER_H_
