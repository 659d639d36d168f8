// Gradient rules emit backward ops only for inputs that need a gradient and
// name their ops after the forward op. Uses a recording GradContext that
// runs shape inference on every added op (as autodiff does).
#include <gtest/gtest.h>

#include <set>

#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace {

class RecordingGradContext final : public GradContext {
 public:
  RecordingGradContext(const OpConf& op, std::map<std::string, TensorDesc> descs,
                       std::set<std::string> needs)
      : op_(op), descs_(std::move(descs)), needs_(std::move(needs)) {
    ArgDescs inputs;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) inputs[arg.name()].push_back(descs_.at(lbn));
    }
    auto outs = InferOp(op, inputs);
    CHECK(outs.ok()) << outs.status();
    for (const ArgProto& arg : op.output()) {
      for (int i = 0; i < arg.lbn_size(); ++i) {
        descs_[arg.lbn(i)] = outs->at(arg.name()).at(i);
        out_grads_[arg.lbn(i)] = arg.lbn(i) + "@grad";
        descs_[arg.lbn(i) + "@grad"] = outs->at(arg.name()).at(i);
      }
    }
  }

  const OpConf& op() const override { return op_; }
  int InputCount(const std::string& arg) const override { return Arg(op_.input(), arg).lbn_size(); }
  const std::string& InputLbn(const std::string& arg, int index) const override {
    return Arg(op_.input(), arg).lbn(index);
  }
  const TensorDesc& InputDesc(const std::string& arg, int index) const override {
    return descs_.at(InputLbn(arg, index));
  }
  const std::string& OutputLbn(const std::string& arg, int index) const override {
    return Arg(op_.output(), arg).lbn(index);
  }
  const TensorDesc& OutputDesc(const std::string& arg, int index) const override {
    return descs_.at(OutputLbn(arg, index));
  }
  std::string OutputGradLbn(const std::string& arg, int index) const override {
    return out_grads_.at(OutputLbn(arg, index));
  }
  bool NeedsInputGrad(const std::string& arg, int index) const override {
    return needs_.count(arg + "#" + std::to_string(index)) > 0;
  }
  StatusOr<std::string> AddOp(OpConf op) override {
    ArgDescs inputs;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) inputs[arg.name()].push_back(descs_.at(lbn));
    }
    ASSIGN_OR_RETURN(ArgDescs outs, InferOp(op, inputs));
    for (const ArgProto& arg : op.output()) {
      for (int i = 0; i < arg.lbn_size(); ++i) {
        descs_[::oflite::OutputLbn(op.name(), arg.name(), i)] = outs.at(arg.name()).at(i);
      }
    }
    added_.push_back(op);
    return op.name();
  }
  void SetInputGrad(const std::string& arg, int index, const std::string& lbn) override {
    grads_[arg + "#" + std::to_string(index)] = lbn;
  }

  const std::vector<OpConf>& added() const { return added_; }
  const std::map<std::string, std::string>& grads() const { return grads_; }
  const TensorDesc& Desc(const std::string& lbn) const { return descs_.at(lbn); }

 private:
  static const ArgProto& Arg(const google::protobuf::RepeatedPtrField<ArgProto>& args,
                             const std::string& name) {
    for (const ArgProto& a : args) {
      if (a.name() == name) return a;
    }
    LOG(FATAL) << "no arg " << name;
  }

  OpConf op_;
  std::map<std::string, TensorDesc> descs_;
  std::set<std::string> needs_;
  std::map<std::string, std::string> out_grads_;
  std::vector<OpConf> added_;
  std::map<std::string, std::string> grads_;
};

Status RunRule(RecordingGradContext* ctx) {
  ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(ctx->op().op_type()));
  return def->grad(ctx);
}

TensorDesc F(const Shape& s) { return TensorDesc(s, DT_FLOAT); }

TEST(GradRuleTest, MatmulOnlyDifferentiatesRequestedInputs) {
  OpConf op =
      OpConfBuilder("matmul", "dense").Input("a", "x").Input("b", "w").Output("out").Build();
  RecordingGradContext ctx(op, {{"x", F({4, 3})}, {"w", F({3, 5})}}, {"b#0"});
  ASSERT_TRUE(RunRule(&ctx).ok());
  ASSERT_EQ(ctx.added().size(), 1u);
  EXPECT_EQ(ctx.added()[0].op_type(), "matmul");
  EXPECT_EQ(ctx.added()[0].name().rfind("dense-", 0), 0u) << ctx.added()[0].name();
  ASSERT_EQ(ctx.grads().size(), 1u);
  EXPECT_EQ(ctx.Desc(ctx.grads().at("b#0")).shape, Shape({3, 5}));
}

// The Linear case x [B, T, K] * w: dx is again a Linear matmul and dw one
// sum_batch matmul (one GEMM over the folded batch), with no reduce_sum.
TEST(GradRuleTest, MatmulLinearCaseIsTwoMatmulsWithoutReduction) {
  for (bool tb : {false, true}) {
    OpConf op = OpConfBuilder("matmul", "proj")
                    .Input("a", "x")
                    .Input("b", "w")
                    .Output("out")
                    .Attr("transpose_b", tb)
                    .Build();
    RecordingGradContext ctx(op, {{"x", F({4, 3, 5})}, {"w", tb ? F({7, 5}) : F({5, 7})}},
                             {"a#0", "b#0"});
    ASSERT_TRUE(RunRule(&ctx).ok());
    ASSERT_EQ(ctx.added().size(), 2u);
    for (const OpConf& added : ctx.added()) EXPECT_EQ(added.op_type(), "matmul");
    const AttrView dw(ctx.added()[1]);
    EXPECT_TRUE(dw.GetBoolOr("sum_batch", false));
    EXPECT_TRUE(dw.GetBoolOr("transpose_a", false));
    EXPECT_FALSE(dw.GetBoolOr("transpose_b", true));
    EXPECT_FALSE(AttrView(ctx.added()[0]).GetBoolOr("sum_batch", false));
    EXPECT_EQ(ctx.Desc(ctx.grads().at("a#0")).shape, Shape({4, 3, 5}));
    EXPECT_EQ(ctx.Desc(ctx.grads().at("b#0")).shape, tb ? Shape({7, 5}) : Shape({5, 7}));
  }
}

// A batch-broadcast operand of rank > 2 gets its gradient summed back.
TEST(GradRuleTest, MatmulBroadcastBatchSumsBackToTheOperand) {
  OpConf op =
      OpConfBuilder("matmul", "attn").Input("a", "p").Input("b", "v").Output("out").Build();
  RecordingGradContext ctx(op, {{"p", F({2, 4, 6, 6})}, {"v", F({1, 4, 6, 3})}}, {"b#0"});
  ASSERT_TRUE(RunRule(&ctx).ok());
  ASSERT_EQ(ctx.added().size(), 3u);
  EXPECT_EQ(ctx.added()[0].op_type(), "matmul");
  EXPECT_EQ(ctx.added()[1].op_type(), "reduce_sum");
  EXPECT_EQ(ctx.added()[2].op_type(), "reshape_like");
  EXPECT_EQ(ctx.Desc(ctx.grads().at("b#0")).shape, Shape({1, 4, 6, 3}));
}

TEST(GradRuleTest, BiasAddPassesDyThroughAndSumsForBias) {
  OpConf op =
      OpConfBuilder("bias_add", "fc").Input("a", "x").Input("b", "bias").Output("out").Build();
  RecordingGradContext ctx(op, {{"x", F({4, 3})}, {"bias", F({3})}}, {"a#0", "b#0"});
  ASSERT_TRUE(RunRule(&ctx).ok());
  ASSERT_EQ(ctx.added().size(), 1u);
  EXPECT_EQ(ctx.added()[0].op_type(), "reduce_sum");
  EXPECT_EQ(ctx.grads().at("a#0"), "fc/out_0@grad");
  EXPECT_EQ(ctx.Desc(ctx.grads().at("b#0")).shape, Shape({3}));
}

TEST(GradRuleTest, BroadcastMulReducesOnlyTheBroadcastInput) {
  OpConf op = OpConfBuilder("mul", "scale").Input("x", "x").Input("y", "s").Output("out").Build();
  RecordingGradContext ctx(op, {{"x", F({4, 3})}, {"s", F({3})}}, {"x#0", "y#0"});
  ASSERT_TRUE(RunRule(&ctx).ok());
  // x: mul; y: mul + reduce_sum + reshape_like.
  ASSERT_EQ(ctx.added().size(), 4u);
  EXPECT_EQ(ctx.Desc(ctx.grads().at("x#0")).shape, Shape({4, 3}));
  EXPECT_EQ(ctx.Desc(ctx.grads().at("y#0")).shape, Shape({3}));
}

TEST(GradRuleTest, NothingNeededAddsNothing) {
  for (const OpConf& op :
       {OpConfBuilder("matmul", "m").Input("a", "x").Input("b", "w").Output("out").Build(),
        OpConfBuilder("relu", "r").Input("x", "x").Output("y").Build(),
        OpConfBuilder("reduce_mean", "rm").Input("x", "x").Output("y").Build()}) {
    RecordingGradContext ctx(op, {{"x", F({3, 3})}, {"w", F({3, 3})}}, {});
    ASSERT_TRUE(RunRule(&ctx).ok()) << op.op_type();
    EXPECT_TRUE(ctx.added().empty()) << op.op_type();
    EXPECT_TRUE(ctx.grads().empty()) << op.op_type();
  }
}

TEST(GradRuleTest, ConcatSlicesOnlyRequestedInputs) {
  OpConf op = OpConfBuilder("concat", "cat")
                  .Input("in", std::vector<std::string>{"a", "b", "c"})
                  .Output("out")
                  .Attr("axis", 1)
                  .Build();
  RecordingGradContext ctx(op, {{"a", F({2, 1})}, {"b", F({2, 4})}, {"c", F({2, 2})}}, {"in#2"});
  ASSERT_TRUE(RunRule(&ctx).ok());
  ASSERT_EQ(ctx.added().size(), 1u);
  EXPECT_EQ(ctx.added()[0].op_type(), "slice");
  EXPECT_EQ(ctx.Desc(ctx.grads().at("in#2")).shape, Shape({2, 2}));
}

}  // namespace
}  // namespace oflite
