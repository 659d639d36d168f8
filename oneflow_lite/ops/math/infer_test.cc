// Shape/dtype inference of the math ops: results on valid inputs and error
// messages (naming the op and both shapes) on invalid ones.
#include <gtest/gtest.h>

#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace {

TensorDesc D(const Shape& shape, DataType dtype = DT_FLOAT) { return TensorDesc(shape, dtype); }

StatusOr<TensorDesc> InferOne(const OpConf& op, const ArgDescs& inputs, const std::string& out) {
  ASSIGN_OR_RETURN(ArgDescs outs, InferOp(op, inputs));
  return outs.at(out).at(0);
}

// Asserts an InvalidArgument error whose message contains every piece.
void ExpectError(const StatusOr<TensorDesc>& result, const std::vector<std::string>& pieces) {
  ASSERT_FALSE(result.ok()) << "expected an error, got " << result->ToString();
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status();
  for (const std::string& piece : pieces) {
    EXPECT_NE(result.status().message().find(piece), std::string::npos)
        << "'" << piece << "' not in: " << result.status().message();
  }
}

OpConf Matmul(bool ta, bool tb) {
  return OpConfBuilder("matmul", "dense1")
      .Input("a", "a")
      .Input("b", "b")
      .Output("out")
      .Attr("transpose_a", ta)
      .Attr("transpose_b", tb)
      .Build();
}

TEST(MathInferTest, MatmulShapesAndMismatch) {
  auto out = InferOne(Matmul(false, false), {{"a", {D({3, 5})}}, {"b", {D({5, 7})}}}, "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({3, 7}));
  out = InferOne(Matmul(true, true), {{"a", {D({5, 3})}}, {"b", {D({7, 5})}}}, "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({3, 7}));
  ExpectError(InferOne(Matmul(false, false), {{"a", {D({3, 5})}}, {"b", {D({4, 7})}}}, "out"),
              {"dense1", "matmul", "(3, 5)", "(4, 7)"});
  ExpectError(InferOne(Matmul(false, false), {{"a", {D({5})}}, {"b", {D({5, 7})}}}, "out"),
              {"dense1", "rank >= 2", "(5,)"});
  ExpectError(
      InferOne(Matmul(false, false), {{"a", {D({3, 5})}}, {"b", {D({5, 7}, DT_DOUBLE)}}}, "out"),
      {"dense1", "dtype"});
}

TEST(MathInferTest, MistypedOptionalAttributeIsAnError) {
  OpConf op = Matmul(false, false);
  SetIntAttr(&op, "transpose_a", 1);
  ExpectError(InferOne(op, {{"a", {D({3, 5})}}, {"b", {D({5, 7})}}}, "out"),
              {"dense1", "transpose_a"});
  OpConf reduce =
      OpConfBuilder("reduce_sum", "r").Input("x", "x").Output("y").Attr("axis", int64_t{0}).Build();
  ExpectError(InferOne(reduce, {{"x", {D({3, 5})}}}, "y"), {"'r'", "axis"});
}

TEST(MathInferTest, BiasAddNeedsMatchingLength) {
  OpConf op =
      OpConfBuilder("bias_add", "fc_bias").Input("a", "a").Input("b", "b").Output("out").Build();
  auto out = InferOne(op, {{"a", {D({4, 6})}}, {"b", {D({6})}}}, "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({4, 6}));
  ExpectError(InferOne(op, {{"a", {D({4, 6})}}, {"b", {D({4})}}}, "out"),
              {"fc_bias", "(4, 6)", "(4,)"});
}

TEST(MathInferTest, BroadcastingBinaryOps) {
  OpConf op = OpConfBuilder("mul", "scale").Input("x", "x").Input("y", "y").Output("out").Build();
  auto out = InferOne(op, {{"x", {D({7, 1, 9})}}, {"y", {D({4, 1})}}}, "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({7, 4, 9}));
  ExpectError(InferOne(op, {{"x", {D({3, 5})}}, {"y", {D({4})}}}, "out"),
              {"scale", "mul", "(3, 5)", "(4,)"});
}

TEST(MathInferTest, AddNeedsEqualShapes) {
  OpConf op = OpConfBuilder("add", "residual").Input("in", {"a", "b", "c"}).Output("out").Build();
  ExpectError(InferOne(op, {{"in", {D({3, 5}), D({3, 5}), D({5, 3})}}}, "out"),
              {"residual", "(3, 5)", "(5, 3)"});
}

TEST(MathInferTest, Reductions) {
  OpConf op = OpConfBuilder("reduce_sum", "loss_sum")
                  .Input("x", "x")
                  .Output("y")
                  .Attr("axis", std::vector<int64_t>{0, -1})
                  .Attr("keepdims", true)
                  .Build();
  auto out = InferOne(op, {{"x", {D({7, 1, 9})}}}, "y");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({1, 1, 1}));
  OpConf all = OpConfBuilder("reduce_mean", "m").Input("x", "x").Output("y").Build();
  out = InferOne(all, {{"x", {D({3, 5})}}}, "y");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({}));
  OpConf bad = OpConfBuilder("reduce_sum", "bad")
                   .Input("x", "x")
                   .Output("y")
                   .Attr("axis", std::vector<int64_t>{2})
                   .Build();
  ExpectError(InferOne(bad, {{"x", {D({3, 5})}}}, "y"), {"bad", "axis 2"});
}

TEST(MathInferTest, ReshapeFlattenTranspose) {
  OpConf reshape = OpConfBuilder("reshape", "r")
                       .Input("x", "x")
                       .Output("y")
                       .Attr("shape", Shape({-1, 5}))
                       .Build();
  auto out = InferOne(reshape, {{"x", {D({3, 10})}}}, "y");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({6, 5}));
  OpConf bad = OpConfBuilder("reshape", "to_img")
                   .Input("x", "x")
                   .Output("y")
                   .Attr("shape", Shape({4, 4}))
                   .Build();
  ExpectError(InferOne(bad, {{"x", {D({3, 5})}}}, "y"), {"to_img", "(3, 5)", "(4, 4)"});
  OpConf two_unknown = OpConfBuilder("reshape", "r2")
                           .Input("x", "x")
                           .Output("y")
                           .Attr("shape", Shape({-1, -1}))
                           .Build();
  ExpectError(InferOne(two_unknown, {{"x", {D({3, 5})}}}, "y"), {"r2", "-1"});

  OpConf flatten = OpConfBuilder("flatten", "f").Input("x", "x").Output("y").Build();
  out = InferOne(flatten, {{"x", {D({2, 1, 28, 28})}}}, "y");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({2, 784}));

  OpConf transpose = OpConfBuilder("transpose", "t")
                         .Input("x", "x")
                         .Output("y")
                         .Attr("perm", std::vector<int64_t>{1, 0, 0})
                         .Build();
  ExpectError(InferOne(transpose, {{"x", {D({2, 3, 4})}}}, "y"), {"t", "(1, 0, 0)", "(2, 3, 4)"});
}

TEST(MathInferTest, ConcatAndSlice) {
  OpConf concat = OpConfBuilder("concat", "cat")
                      .Input("in", std::vector<std::string>{"a", "b"})
                      .Output("out")
                      .Attr("axis", -1)
                      .Build();
  auto out = InferOne(concat, {{"in", {D({3, 2}), D({3, 5})}}}, "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({3, 7}));
  ExpectError(InferOne(concat, {{"in", {D({3, 2}), D({4, 5})}}}, "out"),
              {"cat", "(3, 2)", "(4, 5)"});

  OpConf slice = OpConfBuilder("slice", "crop")
                     .Input("x", "x")
                     .Output("y")
                     .Attr("start", std::vector<int64_t>{-3, 0})
                     .Attr("stop", std::vector<int64_t>{100, 5})
                     .Attr("step", std::vector<int64_t>{2, 1})
                     .Build();
  out = InferOne(slice, {{"x", {D({7, 5})}}}, "y");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, Shape({2, 5}));
  ExpectError(InferOne(slice, {{"x", {D({7, 5, 1})}}}, "y"), {"crop", "(7, 5, 1)"});
}

TEST(MathInferTest, CastAndActivationDtypes) {
  OpConf cast =
      OpConfBuilder("cast", "c").Input("in", "x").Output("out").Attr("dtype", DT_INT64).Build();
  auto out = InferOne(cast, {{"in", {D({3}, DT_FLOAT)}}}, "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype, DT_INT64);
  OpConf relu = OpConfBuilder("relu", "act").Input("x", "x").Output("y").Build();
  ExpectError(InferOne(relu, {{"x", {D({3}, DT_INT32)}}}, "y"), {"act", "int32"});
}

}  // namespace
}  // namespace oflite
