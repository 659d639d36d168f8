// Hyper-parameters of the optimizer update ops (sgd_update, momentum_update,
// adam_update), read from the op's attributes and validated. The op
// definitions validate at shape inference (compile time) and the kernels
// re-read them at Init, so both see the same values.
//
// Attributes (docs/ops.md, "train family"):
//   lr schedule      see lr_schedule.h
//   weight_decay     float >= 0 (default 0): L2 term added to the gradient;
//                    for adam_update with decoupled=true (AdamW) it is
//                    applied to the weights directly instead
//   beta             momentum_update: momentum factor in [0, 1) (default 0.9)
//   beta1, beta2     adam_update: in [0, 1) (defaults 0.9, 0.999)
//   epsilon          adam_update: > 0 (default 1e-8)
//   decoupled        adam_update: bool (default false); true = AdamW
// Pure functions, thread-safe.
#ifndef ONEFLOW_LITE_OPS_TRAIN_OPTIMIZER_CONFIG_H_
#define ONEFLOW_LITE_OPS_TRAIN_OPTIMIZER_CONFIG_H_

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/ops/train/lr_schedule.h"
#include "proto/job.pb.h"

namespace oflite {

struct OptimizerAttrs {
  LrScheduleConfig lr;
  double weight_decay = 0.0;
  double beta = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  bool decoupled = false;
};

// Reads the attributes relevant to op.op_type(); InvalidArgument naming the
// op and the attribute when one is out of range.
StatusOr<OptimizerAttrs> OptimizerAttrsFromOp(const OpConf& op);

}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_TRAIN_OPTIMIZER_CONFIG_H_
