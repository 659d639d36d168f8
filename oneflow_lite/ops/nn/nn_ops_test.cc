// Shape inference, error messages and SBP signatures of the nn ops.
#include <gtest/gtest.h>

#include <set>

#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace {

TensorDesc F(Shape s) { return TensorDesc(std::move(s), DT_FLOAT); }

// The signatures an op offers, as strings ("S(0), B -> S(0)").
std::set<std::string> Signatures(const OpConf& op, const std::vector<TensorDesc>& inputs,
                                 int64_t parallel_num = 2) {
  const OpDef* def = *LookupOpDef(op.op_type());
  ArgDescs in;
  size_t k = 0;
  for (const ArgProto& arg : op.input()) {
    for (int i = 0; i < arg.lbn_size(); ++i) in[arg.name()].push_back(inputs.at(k++));
  }
  StatusOr<ArgDescs> out = InferOp(op, in);
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<TensorDesc> outputs;
  for (const ArgProto& arg : op.output()) {
    for (const TensorDesc& d : out->at(arg.name())) outputs.push_back(d);
  }
  SbpContext ctx(op, inputs, outputs, parallel_num);
  std::set<std::string> result;
  if (def->sbp) {
    EXPECT_TRUE(def->sbp(&ctx).ok());
    for (const SbpSignature& s : ctx.signatures()) {
      EXPECT_EQ(s.inputs.size(), inputs.size()) << op.op_type();
      EXPECT_EQ(s.outputs.size(), outputs.size()) << op.op_type();
      result.insert(s.ToString());
    }
  }
  return result;
}

StatusOr<ArgDescs> Infer(const OpConf& op, const std::vector<TensorDesc>& inputs) {
  ArgDescs in;
  size_t k = 0;
  for (const ArgProto& arg : op.input()) in[arg.name()].push_back(inputs.at(k++));
  return InferOp(op, in);
}

OpConf Conv(std::vector<int64_t> strides, std::vector<int64_t> padding) {
  return OpConfBuilder("conv2d", "conv")
      .Input("x", "a/x_0")
      .Input("weight", "a/w_0")
      .Output("y")
      .Attr("strides", strides)
      .Attr("padding", padding)
      .Build();
}

TEST(NnOpsTest, Conv2dInfersOutputShape) {
  auto out = Infer(Conv({2, 2}, {1, 1}), {F(Shape({2, 3, 7, 5})), F(Shape({4, 3, 3, 3}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y")[0], F(Shape({2, 4, 4, 3})));
}

TEST(NnOpsTest, Conv2dChannelMismatchNamesOpAndShapes) {
  auto out = Infer(Conv({1, 1}, {0, 0}), {F(Shape({2, 3, 7, 5})), F(Shape({4, 2, 3, 3}))});
  ASSERT_FALSE(out.ok());
  const std::string& m = out.status().message();
  EXPECT_NE(m.find("'conv'"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 3, 7, 5)"), std::string::npos) << m;
  EXPECT_NE(m.find("(4, 2, 3, 3)"), std::string::npos) << m;
}

TEST(NnOpsTest, Conv2dSbp) {
  auto sigs = Signatures(Conv({1, 1}, {0, 0}), {F(Shape({4, 3, 5, 5})), F(Shape({2, 3, 3, 3}))});
  EXPECT_EQ(sigs, (std::set<std::string>{"S(0), B -> S(0)", "B, S(0) -> S(1)", "S(1), S(1) -> P"}));
}

TEST(NnOpsTest, SoftmaxSbpSplitsEveryAxisButTheSoftmaxAxis) {
  OpConf op =
      OpConfBuilder("softmax", "sm").Input("x", "a/x_0").Output("y").Attr("axis", 1).Build();
  EXPECT_EQ(Signatures(op, {F(Shape({2, 3, 4}))}),
            (std::set<std::string>{"S(0) -> S(0)", "S(2) -> S(2)"}));
}

TEST(NnOpsTest, CrossEntropyInfersAndSplitsTheBatch) {
  OpConf op = OpConfBuilder("sparse_softmax_cross_entropy", "xent")
                  .Input("prediction", "a/p_0")
                  .Input("label", "a/l_0")
                  .Output("prob")
                  .Output("out")
                  .Build();
  const std::vector<TensorDesc> in = {F(Shape({8, 10})), TensorDesc(Shape({8}), DT_INT64)};
  auto out = Infer(op, in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("prob")[0], F(Shape({8, 10})));
  EXPECT_EQ(out->at("out")[0], F(Shape({8})));
  EXPECT_EQ(Signatures(op, in), (std::set<std::string>{"S(0), S(0) -> S(0), S(0)"}));
  auto bad = Infer(op, {F(Shape({8, 10})), TensorDesc(Shape({8}), DT_FLOAT)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("int32 or int64"), std::string::npos);
}

TEST(NnOpsTest, LayerNormShapesAndSbp) {
  OpConf op = OpConfBuilder("layer_norm", "ln")
                  .Input("x", "a/x_0")
                  .Input("gamma", "a/g_0")
                  .Input("beta", "a/b_0")
                  .Output("y")
                  .Output("mean")
                  .Output("inv_variance")
                  .Attr("begin_norm_axis", 2)
                  .Build();
  const std::vector<TensorDesc> in = {F(Shape({2, 3, 4, 5})), F(Shape({4, 5})), F(Shape({4, 5}))};
  auto out = Infer(op, in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("mean")[0], F(Shape({2, 3})));
  EXPECT_EQ(Signatures(op, in), (std::set<std::string>{"S(0), B, B -> S(0), S(0), S(0)",
                                                       "S(1), B, B -> S(1), S(1), S(1)"}));
  auto bad = Infer(op, {F(Shape({2, 3, 4, 5})), F(Shape({5})), F(Shape({4, 5}))});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(5,)"), std::string::npos) << bad.status();
}

TEST(NnOpsTest, EmbeddingShapesAndSbp) {
  OpConf op = OpConfBuilder("embedding", "emb")
                  .Input("weight", "a/w_0")
                  .Input("indices", "a/i_0")
                  .Output("out")
                  .Build();
  const std::vector<TensorDesc> in = {F(Shape({10, 4})), TensorDesc(Shape({2, 3}), DT_INT32)};
  auto out = Infer(op, in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("out")[0], F(Shape({2, 3, 4})));
  EXPECT_EQ(Signatures(op, in),
            (std::set<std::string>{"B, S(0) -> S(0)", "B, S(1) -> S(1)", "S(1), B -> S(2)"}));
}

TEST(NnOpsTest, PoolArgmaxAccuracyDropoutShapes) {
  OpConf pool = OpConfBuilder("max_pool2d", "pool")
                    .Input("x", "a/x_0")
                    .Output("y")
                    .Attr("kernel_size", std::vector<int64_t>{3, 3})
                    .Attr("strides", std::vector<int64_t>{2, 2})
                    .Attr("padding", std::vector<int64_t>{1, 1})
                    .Build();
  auto out = Infer(pool, {F(Shape({1, 2, 7, 5}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y")[0], F(Shape({1, 2, 4, 3})));

  OpConf argmax =
      OpConfBuilder("argmax", "am").Input("x", "a/x_0").Output("y").Attr("axis", 1).Build();
  out = Infer(argmax, {F(Shape({2, 3, 4}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y")[0], TensorDesc(Shape({2, 4}), DT_INT32));
  EXPECT_EQ(Signatures(argmax, {F(Shape({2, 3, 4}))}),
            (std::set<std::string>{"S(0) -> S(0)", "S(2) -> S(1)"}));

  OpConf accuracy = OpConfBuilder("accuracy", "acc")
                        .Input("prediction", "a/p_0")
                        .Input("label", "a/l_0")
                        .Output("out")
                        .Build();
  const std::vector<TensorDesc> acc_in = {F(Shape({6, 3})), TensorDesc(Shape({6}), DT_INT32)};
  out = Infer(accuracy, acc_in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("out")[0], F(Shape()));
  EXPECT_TRUE(Signatures(accuracy, acc_in).empty());  // all-broadcast only

  OpConf dropout = OpConfBuilder("dropout", "drop")
                       .Input("x", "a/x_0")
                       .Output("y")
                       .Output("mask")
                       .Attr("rate", 0.5)
                       .Build();
  out = Infer(dropout, {F(Shape({3, 2}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("mask")[0], TensorDesc(Shape({3, 2}), DT_UINT8));
  OpConf bad_rate = OpConfBuilder("dropout", "drop2")
                        .Input("x", "a/x_0")
                        .Output("y")
                        .Output("mask")
                        .Attr("rate", 1.5)
                        .Build();
  out = Infer(bad_rate, {F(Shape({3, 2}))});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("drop2"), std::string::npos) << out.status();
}

// Grad ops check their inputs against each other; errors name the op and
// both shapes.
TEST(NnOpsTest, GradOpMismatchesNameOpAndShapes) {
  struct Case {
    OpConf op;
    std::vector<TensorDesc> inputs;
    std::vector<std::string> expected;
  };
  const TensorDesc i32(Shape({3}), DT_INT32);
  const std::vector<int64_t> two = {2, 2};
  std::vector<Case> cases = {
      {OpConfBuilder("embedding_grad", "eg")
           .Input("dy", "a/dy_0")
           .Input("indices", "a/i_0")
           .Input("like", "a/w_0")
           .Output("dweight")
           .Build(),
       {F(Shape({3, 5})), i32, F(Shape({10, 4}))},
       {"'eg'", "(3, 5)", "(3, 4)"}},
      {OpConfBuilder("max_pool2d_grad", "mg")
           .Input("dy", "a/dy_0")
           .Input("x", "a/x_0")
           .Input("y", "a/y_0")
           .Output("dx")
           .Attr("kernel_size", two)
           .Attr("strides", two)
           .Build(),
       {F(Shape({1, 1, 2, 2})), F(Shape({1, 1, 4, 4})), F(Shape({1, 1, 3, 2}))},
       {"'mg'", "(1, 1, 3, 2)", "(1, 1, 2, 2)"}},
      {OpConfBuilder("conv2d_grad_filter", "cg")
           .Input("dy", "a/dy_0")
           .Input("x", "a/x_0")
           .Input("like", "a/w_0")
           .Output("dw")
           .Build(),
       {F(Shape({1, 2, 5, 5})), F(Shape({1, 3, 6, 6})), F(Shape({2, 3, 3, 3}))},
       {"'cg'", "(1, 2, 5, 5)", "(1, 2, 4, 4)"}},
      {OpConfBuilder("sparse_softmax_cross_entropy_grad", "xg")
           .Input("dy", "a/dy_0")
           .Input("prob", "a/p_0")
           .Input("label", "a/l_0")
           .Output("dx")
           .Build(),
       {F(Shape({4})), F(Shape({3, 5})), i32},
       {"'xg'", "(4,)", "(3, 5)"}},
      {OpConfBuilder("layer_norm_grad", "lg")
           .Input("dy", "a/dy_0")
           .Input("x", "a/x_0")
           .Input("mean", "a/m_0")
           .Input("inv_variance", "a/v_0")
           .Input("gamma", "a/g_0")
           .Output("dx")
           .Output("dgamma")
           .Output("dbeta")
           .Build(),
       {F(Shape({3, 4})), F(Shape({3, 4})), F(Shape({4})), F(Shape({3})), F(Shape({4}))},
       {"'lg'", "mean", "(3,)", "(4,)"}},
  };
  for (const Case& c : cases) {
    auto out = Infer(c.op, c.inputs);
    ASSERT_FALSE(out.ok()) << c.op.name();
    for (const std::string& piece : c.expected) {
      EXPECT_NE(out.status().message().find(piece), std::string::npos)
          << c.op.name() << ": '" << piece << "' not in: " << out.status().message();
    }
  }
}

}  // namespace
}  // namespace oflite
