// The `variable` op: a persistent, initialized tensor (docs/ops.md).
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/train/initializer.h"

namespace oflite {
namespace {

Status InferVariable(InferContext* ctx) {
  ASSIGN_OR_RETURN(Shape shape, ctx->attrs().GetShape("shape"));
  for (int64_t d : shape.dims()) {
    if (d < 0) return ctx->Error("shape ", shape, " has a negative dimension");
  }
  DataType dtype = DT_FLOAT;
  if (ctx->attrs().Has("dtype")) {
    ASSIGN_OR_RETURN(dtype, ctx->attrs().GetDataType("dtype"));
  }
  if (dtype != DT_FLOAT && dtype != DT_DOUBLE) {
    return ctx->Error("dtype must be float32 or float64, got ", DataTypeName(dtype));
  }
  const int64_t split_axis = ctx->attrs().GetIntOr("split_axis", -1);
  if (split_axis < -1 || split_axis >= shape.rank()) {
    return ctx->Error("split_axis ", split_axis, " out of range for shape ", shape);
  }
  StatusOr<InitializerConfig> init = InitializerFromAttrs(ctx->op(), shape);
  if (!init.ok()) return init.status();
  *ctx->Output("out") = TensorDesc(shape, dtype);
  return Status::OK();
}

REGISTER_OP("variable").Output("out").Source().Infer(InferVariable).Sbp(SplitOutputAlongLongAxes);

}  // namespace
}  // namespace oflite
