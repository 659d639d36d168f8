#include "oneflow_lite/ops/graph_capture.h"

#include "oneflow_lite/common/attr.h"

namespace oflite {

bool LaunchArgumentsFollowTheIteration(const OpConf& op) {
  if (op.op_type() == "adam_update" || op.op_type() == "dropout") return true;
  if (op.op_type() != "sgd_update" && op.op_type() != "momentum_update") return false;
  AttrView attrs(op);
  return attrs.GetStringOr("lr_type", "constant") != "constant" ||
         attrs.GetIntOr("warmup_iters", 0) > 0;
}

}  // namespace oflite
