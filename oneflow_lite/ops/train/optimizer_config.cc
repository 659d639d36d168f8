#include "oneflow_lite/ops/train/optimizer_config.h"

#include <cmath>
#include <string>

#include "oneflow_lite/common/attr.h"

namespace oflite {
namespace {

Status CheckUnitInterval(const std::string& where, const char* key, double v) {
  if (!(v >= 0.0 && v < 1.0)) {
    return InvalidArgumentError(where, key, " must be in [0, 1), got ", v);
  }
  return Status::OK();
}

}  // namespace

StatusOr<OptimizerAttrs> OptimizerAttrsFromOp(const OpConf& op) {
  const std::string where = "op '" + op.name() + "' (" + op.op_type() + "): ";
  AttrView attrs(op);
  OptimizerAttrs result;
  ASSIGN_OR_RETURN(result.lr, LrScheduleFromAttrs(op));
  result.weight_decay = attrs.GetFloatOr("weight_decay", 0.0);
  if (!(result.weight_decay >= 0.0) || !std::isfinite(result.weight_decay)) {
    return InvalidArgumentError(where, "weight_decay must be finite and >= 0, got ",
                                result.weight_decay);
  }
  if (op.op_type() == "momentum_update") {
    result.beta = attrs.GetFloatOr("beta", 0.9);
    RETURN_IF_ERROR(CheckUnitInterval(where, "beta", result.beta));
  }
  if (op.op_type() == "adam_update") {
    result.beta1 = attrs.GetFloatOr("beta1", 0.9);
    result.beta2 = attrs.GetFloatOr("beta2", 0.999);
    result.epsilon = attrs.GetFloatOr("epsilon", 1e-8);
    result.decoupled = attrs.GetBoolOr("decoupled", false);
    RETURN_IF_ERROR(CheckUnitInterval(where, "beta1", result.beta1));
    RETURN_IF_ERROR(CheckUnitInterval(where, "beta2", result.beta2));
    if (!(result.epsilon > 0.0) || !std::isfinite(result.epsilon)) {
      return InvalidArgumentError(where, "epsilon must be finite and > 0, got ", result.epsilon);
    }
  }
  return result;
}

}  // namespace oflite
