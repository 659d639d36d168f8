// Learning-rate schedules shared by every optimizer update op.
//
// An update op carries its schedule as attributes (documented in
// docs/ops.md, "LR schedule attributes"):
//   lr_type       "constant" | "step" | "cosine"   (default "constant")
//   base_lr       float, >= 0                       (required)
//   warmup_iters  int, >= 0                         (default 0)
//   step_size     int, > 0 for "step"
//   gamma         float, for "step"                 (default 0.1)
//   total_iters   int, > warmup_iters for "cosine"
//   min_lr        float, for "cosine"               (default 0)
// The kernel computes the lr of iteration t (0-based,
// KernelContext::iteration()) with LearningRateAt:
//   warm-up (every type): t < warmup_iters -> base_lr * (t + 1) / warmup_iters
//   constant: base_lr
//   step:     base_lr * gamma ^ floor(t / step_size)
//   cosine:   p = min(1, (t - warmup_iters) / (total_iters - warmup_iters));
//             min_lr + (base_lr - min_lr) * (1 + cos(pi * p)) / 2
// so a cosine schedule reaches min_lr at t = total_iters and stays there.
// Computation is in double. Pure functions, thread-safe.
#ifndef ONEFLOW_LITE_OPS_TRAIN_LR_SCHEDULE_H_
#define ONEFLOW_LITE_OPS_TRAIN_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

enum class LrType { kConstant, kStep, kCosine };

struct LrScheduleConfig {
  LrType type = LrType::kConstant;
  double base_lr = 0.0;
  int64_t warmup_iters = 0;
  int64_t step_size = 0;
  double gamma = 0.1;
  int64_t total_iters = 0;
  double min_lr = 0.0;
};

// Reads and validates the attributes above. Errors are InvalidArgument and
// name the op and the offending attribute.
StatusOr<LrScheduleConfig> LrScheduleFromAttrs(const OpConf& op);

// Validates a config (same checks as LrScheduleFromAttrs); `where` prefixes
// messages.
Status ValidateLrSchedule(const LrScheduleConfig& config, const std::string& where);

// The learning rate at 0-based iteration `iteration`.
double LearningRateAt(const LrScheduleConfig& config, int64_t iteration);

// Converts the Job's LrSchedule message (proto/job.proto) and writes the
// attributes onto an update op (used by the optimizer pass).
LrScheduleConfig LrScheduleFromProto(const LrSchedule& proto);
void SetLrScheduleAttrs(const LrScheduleConfig& config, OpConf* op);

const char* LrTypeName(LrType type);  // "constant", "step", "cosine"

}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_TRAIN_LR_SCHEDULE_H_
