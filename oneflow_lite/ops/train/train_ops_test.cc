// Shape inference, validation and SBP signatures of the train ops.
#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/train/initializer.h"

namespace oflite {
namespace {

OpConf Variable(const Shape& shape, const std::string& initializer) {
  return OpConfBuilder("variable", "w")
      .Output("out")
      .Attr("shape", shape)
      .Attr("initializer", initializer)
      .Build();
}

void ExpectErrorContains(const Status& status, const std::string& fragment) {
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status;
}

TEST(VariableOpTest, InfersShapeAndDtype) {
  OpConf op = Variable(Shape{3, 5}, "xavier_uniform");
  SetDataTypeAttr(&op, "dtype", DT_DOUBLE);
  StatusOr<ArgDescs> out = InferOp(op, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("out").at(0), TensorDesc(Shape{3, 5}, DT_DOUBLE));
  StatusOr<ArgDescs> scalar = InferOp(Variable(Shape{}, "constant"), {});
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->at("out").at(0), TensorDesc(Shape{}, DT_FLOAT));
}

TEST(VariableOpTest, RejectsBadAttributes) {
  ExpectErrorContains(InferOp(Variable(Shape{2}, "glorot"), {}).status(), "unknown initializer");
  ExpectErrorContains(InferOp(Variable(Shape{2, -1}, "constant"), {}).status(), "negative");
  OpConf bad_range = Variable(Shape{2}, "uniform");
  SetFloatAttr(&bad_range, "low", 1.0);
  SetFloatAttr(&bad_range, "high", -1.0);
  ExpectErrorContains(InferOp(bad_range, {}).status(), "low <= high");
  OpConf bad_axis = Variable(Shape{2}, "constant");
  SetIntAttr(&bad_axis, "split_axis", 1);
  ExpectErrorContains(InferOp(bad_axis, {}).status(), "split_axis");
  OpConf int_var = Variable(Shape{2}, "constant");
  SetDataTypeAttr(&int_var, "dtype", DT_INT32);
  ExpectErrorContains(InferOp(int_var, {}).status(), "float32 or float64");
  ExpectErrorContains(InferOp(Variable(Shape{0, 4}, "kaiming_normal"), {}).status(),
                      "positive fans");
}

TEST(VariableOpTest, SplitSignaturesForAxesWithEnoughElements) {
  StatusOr<const OpDef*> def = LookupOpDef("variable");
  ASSERT_TRUE(def.ok());
  OpConf op = Variable(Shape{4, 1}, "constant");
  std::vector<TensorDesc> outputs = {TensorDesc(Shape{4, 1}, DT_FLOAT)};
  SbpContext ctx(op, {}, outputs, 2);
  ASSERT_TRUE((*def)->sbp(&ctx).ok());
  ASSERT_EQ(ctx.signatures().size(), 1u);  // S(0) only: dim 1 has one element
  EXPECT_EQ(ctx.signatures()[0].ToString(), " -> S(0)");
}

TEST(InitializerTest, FanConvention) {
  EXPECT_EQ(ComputeFans(Shape{}).fan_in, 1);
  EXPECT_EQ(ComputeFans(Shape{7}).fan_out, 7);
  Fans dense = ComputeFans(Shape{784, 128});  // [in, out]
  EXPECT_EQ(dense.fan_in, 784);
  EXPECT_EQ(dense.fan_out, 128);
  Fans conv = ComputeFans(Shape{16, 3, 5, 5});  // [O, C, KH, KW]
  EXPECT_EQ(conv.fan_in, 75);
  EXPECT_EQ(conv.fan_out, 400);
}

TEST(InitializerTest, GlorotAndHeRanges) {
  StatusOr<InitializerConfig> xavier =
      InitializerFromAttrs(Variable(Shape{4, 2}, "xavier_uniform"), Shape{4, 2});
  ASSERT_TRUE(xavier.ok());
  EXPECT_EQ(xavier->kind, InitializerConfig::Kind::kUniform);
  EXPECT_DOUBLE_EQ(xavier->high, 1.0);  // sqrt(6 / 6)
  EXPECT_DOUBLE_EQ(xavier->low, -1.0);
  StatusOr<InitializerConfig> he =
      InitializerFromAttrs(Variable(Shape{8, 3}, "kaiming_normal"), Shape{8, 3});
  ASSERT_TRUE(he.ok());
  EXPECT_EQ(he->kind, InitializerConfig::Kind::kNormal);
  EXPECT_DOUBLE_EQ(he->std, 0.5);                                     // sqrt(2) / sqrt(8)
  OpConf with_gain = Variable(Shape{2, 1, 3, 1}, "kaiming_uniform");  // fan_in 3
  SetFloatAttr(&with_gain, "gain", 2.0);
  StatusOr<InitializerConfig> he_uniform = InitializerFromAttrs(with_gain, Shape{2, 1, 3, 1});
  ASSERT_TRUE(he_uniform.ok());
  EXPECT_DOUBLE_EQ(he_uniform->high, 2.0);  // 2 * sqrt(3 / 3)
  OpConf override_fans = Variable(Shape{5, 5}, "xavier_normal");
  SetIntAttr(&override_fans, "fan_in", 1);
  SetIntAttr(&override_fans, "fan_out", 1);
  StatusOr<InitializerConfig> overridden = InitializerFromAttrs(override_fans, Shape{5, 5});
  ASSERT_TRUE(overridden.ok());
  EXPECT_DOUBLE_EQ(overridden->std, 1.0);  // sqrt(2 / 2)
}

TEST(InitializerTest, SeedFromAttrOrFromJobSeedAndName) {
  OpConf a = Variable(Shape{1}, "normal");
  OpConf b = a;
  b.set_name("other");
  EXPECT_NE(EffectiveSeed(a, 1), EffectiveSeed(b, 1));
  EXPECT_NE(EffectiveSeed(a, 1), EffectiveSeed(a, 2));
  EXPECT_EQ(EffectiveSeed(a, 1), EffectiveSeed(a, 1));
  SetIntAttr(&a, "seed", 42);
  EXPECT_EQ(EffectiveSeed(a, 1), 42u);
  EXPECT_EQ(EffectiveSeed(a, 9), 42u);
}

ArgDescs UpdateInputs(const std::vector<std::string>& args, const TensorDesc& desc) {
  ArgDescs inputs;
  for (const std::string& arg : args) inputs[arg] = {desc};
  return inputs;
}

OpConf AdamOp(bool with_scale) {
  OpConfBuilder builder("adam_update", "w-adam");
  builder.Input("model", "w/out_0").Input("model_diff", "g/out_0").Input("m", "m/out_0");
  builder.Input("v", "v/out_0");
  if (with_scale) builder.Input("scale", "clip/out_0");
  return builder.Attr("base_lr", 0.01).Build();
}

TEST(UpdateOpsTest, InferChecksDescsAndAttrs) {
  const TensorDesc desc(Shape{3, 2}, DT_FLOAT);
  ArgDescs inputs = UpdateInputs({"model", "model_diff", "m", "v"}, desc);
  StatusOr<ArgDescs> ok = InferOp(AdamOp(false), inputs);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->empty());

  inputs["scale"] = {TensorDesc(Shape{}, DT_FLOAT)};
  EXPECT_TRUE(InferOp(AdamOp(true), inputs).ok());
  inputs["scale"] = {TensorDesc(Shape{2}, DT_FLOAT)};
  ExpectErrorContains(InferOp(AdamOp(true), inputs).status(), "scale must be a one-element");

  ArgDescs mismatched = UpdateInputs({"model", "model_diff", "m", "v"}, desc);
  mismatched["v"] = {TensorDesc(Shape{2, 3}, DT_FLOAT)};
  ExpectErrorContains(InferOp(AdamOp(false), mismatched).status(), "v float32(2, 3)");

  OpConf bad_beta = AdamOp(false);
  SetFloatAttr(&bad_beta, "beta2", 1.0);
  ExpectErrorContains(
      InferOp(bad_beta, UpdateInputs({"model", "model_diff", "m", "v"}, desc)).status(), "beta2");
  OpConf missing_state = OpConfBuilder("momentum_update", "w-mom")
                             .Input("model", "w/out_0")
                             .Input("model_diff", "g/out_0")
                             .Attr("base_lr", 0.1)
                             .Build();
  ExpectErrorContains(InferOp(missing_state, UpdateInputs({"model", "model_diff"}, desc)).status(),
                      "missing input 'momentum'");
}

TEST(UpdateOpsTest, SbpSplitsModelAndStatesTogetherScaleBroadcast) {
  StatusOr<const OpDef*> def = LookupOpDef("adam_update");
  ASSERT_TRUE(def.ok());
  OpConf op = AdamOp(true);
  const TensorDesc desc(Shape{4, 6}, DT_FLOAT);
  std::vector<TensorDesc> inputs = {desc, desc, desc, desc, TensorDesc(Shape{}, DT_FLOAT)};
  SbpContext ctx(op, inputs, {}, 4);
  ASSERT_TRUE((*def)->sbp(&ctx).ok());
  ASSERT_EQ(ctx.signatures().size(), 2u);
  EXPECT_EQ(ctx.signatures()[1].ToString(), "S(1), S(1), S(1), S(1), B -> ");
}

TEST(ClipScaleOpTest, InfersScalarAndChecksMaxNorm) {
  OpConf op = OpConfBuilder("clip_scale", "clip")
                  .Input("in", std::vector<std::string>{"a/out_0", "b/out_0"})
                  .Output("out")
                  .Attr("max_norm", 1.0)
                  .Build();
  ArgDescs inputs;
  inputs["in"] = {TensorDesc(Shape{3}, DT_DOUBLE), TensorDesc(Shape{2, 2}, DT_DOUBLE)};
  StatusOr<ArgDescs> out = InferOp(op, inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("out").at(0), TensorDesc(Shape{}, DT_DOUBLE));
  SetFloatAttr(&op, "max_norm", 0.0);
  ExpectErrorContains(InferOp(op, inputs).status(), "max_norm");
  SetFloatAttr(&op, "max_norm", 1.0);
  inputs["in"][1].dtype = DT_FLOAT;
  ExpectErrorContains(InferOp(op, inputs).status(), "in[1] is float32");
}

}  // namespace
}  // namespace oflite
