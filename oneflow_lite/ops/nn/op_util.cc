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

}  // namespace nn
}  // namespace oflite
