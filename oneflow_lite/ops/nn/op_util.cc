#include "oneflow_lite/ops/nn/op_util.h"

#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {

std::string BackwardOpName(const GradContext& ctx, const std::string& suffix) {
  return ctx.op().name() + "-" + suffix;
}

OpConf AsBackward(const GradContext& ctx, OpConf op) {
  op.set_is_backward(true);
  if (ctx.op().has_placement()) *op.mutable_placement() = ctx.op().placement();
  return op;
}

SbpSignature SignatureByArg(const SbpContext& ctx, const std::map<std::string, SbpParallel>& inputs,
                            const std::map<std::string, SbpParallel>& outputs) {
  SbpSignature sig;
  for (const ArgProto& arg : ctx.op().input()) {
    auto it = inputs.find(arg.name());
    CHECK(it != inputs.end()) << "op '" << ctx.op().name() << "': no SBP for input " << arg.name();
    for (int i = 0; i < arg.lbn_size(); ++i) sig.inputs.push_back(it->second);
  }
  for (const ArgProto& arg : ctx.op().output()) {
    auto it = outputs.find(arg.name());
    CHECK(it != outputs.end()) << "op '" << ctx.op().name() << "': no SBP for output "
                               << arg.name();
    for (int i = 0; i < arg.lbn_size(); ++i) sig.outputs.push_back(it->second);
  }
  return sig;
}

const TensorDesc& SbpInputDesc(const SbpContext& ctx, const std::string& arg) {
  size_t flat = 0;
  for (const ArgProto& a : ctx.op().input()) {
    if (a.name() == arg) return ctx.inputs().at(flat);
    flat += a.lbn_size();
  }
  LOG(FATAL) << "op '" << ctx.op().name() << "': no input " << arg;
}

void AddSameSplitSignatures(SbpContext* ctx, const std::vector<int64_t>& axes) {
  for (int64_t axis : axes) {
    SbpSignature sig;
    sig.inputs.assign(ctx->inputs().size(), SplitSbp(axis));
    sig.outputs.assign(ctx->outputs().size(), SplitSbp(axis));
    ctx->Add(std::move(sig));
  }
}

Status NormalizationGradRule(GradContext* ctx, const std::string& forward_type,
                             bool statistics_grads,
                             const std::function<void(OpConfBuilder*)>& add_attrs) {
  const std::string dy = ctx->OutputGradLbn("y");
  const std::string dmean = statistics_grads ? ctx->OutputGradLbn("mean") : "";
  const std::string dinv = statistics_grads ? ctx->OutputGradLbn("inv_variance") : "";
  if (dy.empty() && dmean.empty() && dinv.empty()) return Status::OK();
  if (dy.empty()) {
    return UnimplementedError("op '", ctx->op().name(), "' (", forward_type,
                              "): gradient flows into mean/inv_variance but not y");
  }
  const std::string grad_type = forward_type + "_grad";
  OpConfBuilder builder(grad_type, BackwardOpName(*ctx, grad_type));
  builder.Input("dy", dy)
      .Input("x", ctx->InputLbn("x"))
      .Input("mean", ctx->OutputLbn("mean"))
      .Input("inv_variance", ctx->OutputLbn("inv_variance"))
      .Input("gamma", ctx->InputLbn("gamma"));
  if (!dmean.empty()) builder.Input("dmean", dmean);
  if (!dinv.empty()) builder.Input("dinv_variance", dinv);
  builder.Output("dx").Output("dgamma").Output("dbeta");
  add_attrs(&builder);
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, builder.Build())));
  if (ctx->NeedsInputGrad("x")) ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  if (ctx->NeedsInputGrad("gamma")) ctx->SetInputGrad("gamma", 0, OutputLbn(name, "dgamma"));
  if (ctx->NeedsInputGrad("beta")) ctx->SetInputGrad("beta", 0, OutputLbn(name, "dbeta"));
  return Status::OK();
}

OpDefBuilder NormalizationGradOpDef(const std::string& forward_type) {
  OpDefBuilder def(forward_type + "_grad");
  def.Input("dy")
      .Input("x")
      .Input("mean")
      .Input("inv_variance")
      .Input("gamma")
      .OptionalInput("dmean")
      .OptionalInput("dinv_variance")
      .Output("dx")
      .Output("dgamma")
      .Output("dbeta");
  return def;
}

}  // namespace nn
}  // namespace oflite
