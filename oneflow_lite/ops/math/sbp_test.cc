// Every SBP signature offered by a math op must agree with running the op
// on one device: checked per op on 2 and 3 devices (balanced uneven splits
// included) with the kernels on physical shards.
#include <gtest/gtest.h>

#include <limits>

#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace math {
namespace {

HostTensor Random(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return RandomTensor(TensorDesc(shape, DT_DOUBLE), seed, lo, hi);
}

struct Case {
  OpConf op;
  std::map<std::string, Shape> inputs;  // lbn -> shape (float64)
  size_t min_signatures;
};

TensorMap MakeEnv(const Case& c) {
  TensorMap env;
  uint64_t seed = 1;
  for (const auto& [lbn, shape] : c.inputs) env.emplace(lbn, Random(shape, ++seed, 0.5, 2.0));
  return env;
}

void ExpectAllConsistent(const Case& c) {
  for (int64_t n : {2, 3}) {
    auto result = CheckSbpSignatures(c.op, MakeEnv(c), n);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_GE(result->signatures.size(), c.min_signatures) << c.op.op_type();
  }
}

OpConf Unary(const std::string& type, const std::string& in, const std::string& out) {
  return OpConfBuilder(type, type).Input(in, "x").Output(out).Build();
}

OpConf Binary(const std::string& type, const std::string& a, const std::string& b,
              const std::string& out) {
  return OpConfBuilder(type, type).Input(a, "x").Input(b, "y").Output(out).Build();
}

TEST(SbpTest, MatmulWithEveryTransposeOffersFiveConsistentSignatures) {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const int64_t m = 6, k = 5, n = 7;
    OpConf op = OpConfBuilder("matmul", "mm")
                    .Input("a", "a")
                    .Input("b", "b")
                    .Output("out")
                    .Attr("transpose_a", ta)
                    .Attr("transpose_b", tb)
                    .Attr("alpha", 0.5)
                    .Build();
    Case c{op,
           {{"a", ta ? Shape({k, m}) : Shape({m, k})}, {"b", tb ? Shape({n, k}) : Shape({k, n})}},
           5};
    ExpectAllConsistent(c);
    auto result = CheckSbpSignatures(op, MakeEnv(c), 2);
    ASSERT_TRUE(result.ok());
    std::vector<std::string> texts;
    for (const SbpSignature& sig : result->signatures) texts.push_back(sig.ToString());
    const std::string a_m = ta ? "S(1)" : "S(0)", b_n = tb ? "S(0)" : "S(1)";
    const std::string a_k = ta ? "S(0)" : "S(1)", b_k = tb ? "S(1)" : "S(0)";
    EXPECT_NE(std::find(texts.begin(), texts.end(), a_m + ", B -> S(0)"), texts.end());
    EXPECT_NE(std::find(texts.begin(), texts.end(), "B, " + b_n + " -> S(1)"), texts.end());
    EXPECT_NE(std::find(texts.begin(), texts.end(), a_k + ", " + b_k + " -> P"), texts.end());
    EXPECT_NE(std::find(texts.begin(), texts.end(), "P, B -> P"), texts.end());
    EXPECT_NE(std::find(texts.begin(), texts.end(), "B, P -> P"), texts.end());
  }
}

TEST(SbpTest, ElementwiseAndActivationOps) {
  const Shape s({6, 5});
  std::vector<Case> cases = {
      {OpConfBuilder("add", "add").Input("in", {"x", "y", "z"}).Output("out").Build(),
       {{"x", s}, {"y", s}, {"z", s}},
       3},
      {Binary("sub", "x", "y", "out"), {{"x", s}, {"y", s}}, 3},
      {Binary("mul", "x", "y", "out"), {{"x", s}, {"y", Shape({5})}}, 4},
      {Binary("div", "x", "y", "out"), {{"x", Shape({6, 1, 5})}, {"y", Shape({3, 1})}}, 3},
      {Binary("mul", "x", "y", "out"), {{"x", Shape({7, 1})}, {"y", Shape({1, 3})}}, 4},
      {OpConfBuilder("scalar_add", "sa").Input("in", "x").Output("out").Attr("value", 2.0).Build(),
       {{"x", s}},
       2},
      {OpConfBuilder("scalar_mul", "sm").Input("in", "x").Output("out").Attr("value", 3.0).Build(),
       {{"x", s}},
       3},
      {OpConfBuilder("scalar_pow", "sp")
           .Input("in", "x")
           .Output("out")
           .Attr("exponent", 2.0)
           .Build(),
       {{"x", s}},
       2},
      {Unary("identity", "in", "out"), {{"x", s}}, 3},
      {OpConfBuilder("zeros_like", "z").Input("like", "x").Output("out").Build(), {{"x", s}}, 3},
      {OpConfBuilder("cast", "c").Input("in", "x").Output("out").Attr("dtype", DT_FLOAT).Build(),
       {{"x", s}},
       3},
      {OpConfBuilder("cast", "c").Input("in", "x").Output("out").Attr("dtype", DT_INT64).Build(),
       {{"x", s}},
       2},
      {OpConfBuilder("bias_add", "ba")
           .Input("a", "x")
           .Input("b", "y")
           .Output("out")
           .Attr("axis", 1)
           .Build(),
       {{"x", Shape({6, 5, 3})}, {"y", Shape({5})}},
       4},
  };
  for (const char* type : {"relu", "sigmoid", "tanh", "gelu"}) {
    cases.push_back({Unary(type, "x", "y"), {{"x", s}}, 2});
  }
  for (const char* type : {"relu_grad", "sigmoid_grad", "tanh_grad"}) {
    cases.push_back({Binary(type, "dy", "y", "dx"), {{"x", s}, {"y", s}}, 3});
  }
  cases.push_back({Binary("gelu_grad", "dy", "x", "dx"), {{"x", s}, {"y", s}}, 3});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op.op_type());
    ExpectAllConsistent(c);
  }
}

TEST(SbpTest, ReductionsAndBroadcastLike) {
  std::vector<Case> cases;
  for (const char* type : {"reduce_sum", "reduce_mean"}) {
    for (bool keepdims : {false, true}) {
      for (const std::vector<int64_t>& axes :
           {std::vector<int64_t>{1}, std::vector<int64_t>{0, 2}, std::vector<int64_t>{}}) {
        cases.push_back({OpConfBuilder(type, "r")
                             .Input("x", "x")
                             .Output("y")
                             .Attr("axis", axes)
                             .Attr("keepdims", keepdims)
                             .Build(),
                         {{"x", Shape({6, 5, 7})}},
                         1});
      }
    }
  }
  cases.push_back({OpConfBuilder("broadcast_like", "bl")
                       .Input("x", "x")
                       .Input("like", "y")
                       .Output("y")
                       .Attr("axis", std::vector<int64_t>{1})
                       .Build(),
                   {{"x", Shape({6, 7})}, {"y", Shape({6, 5, 7})}},
                   4});
  cases.push_back(
      {OpConfBuilder("broadcast_like", "bl").Input("x", "x").Input("like", "y").Output("y").Build(),
       {{"x", Shape({1, 7})}, {"y", Shape({6, 7})}},
       3});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op.DebugString());
    ExpectAllConsistent(c);
  }
}

TEST(SbpTest, LayoutOps) {
  const std::vector<int64_t> start{0, 1, 0}, stop{6, 5, 7}, step{1, 2, 1};
  std::vector<Case> cases = {
      {OpConfBuilder("reshape", "r")
           .Input("x", "x")
           .Output("y")
           .Attr("shape", Shape({6, 35}))
           .Build(),
       {{"x", Shape({6, 5, 7})}},
       2},
      {OpConfBuilder("reshape", "r")
           .Input("x", "x")
           .Output("y")
           .Attr("shape", Shape({12, 3, 5}))
           .Build(),
       {{"x", Shape({6, 6, 5})}},
       2},
      {OpConfBuilder("flatten", "f").Input("x", "x").Output("y").Build(),
       {{"x", Shape({6, 6, 5})}},
       2},
      {OpConfBuilder("reshape_like", "rl").Input("x", "x").Input("like", "y").Output("y").Build(),
       {{"x", Shape({6, 35})}, {"y", Shape({6, 5, 7})}},
       2},
      {OpConfBuilder("transpose", "t")
           .Input("x", "x")
           .Output("y")
           .Attr("perm", std::vector<int64_t>{2, 0, 1})
           .Build(),
       {{"x", Shape({6, 5, 7})}},
       4},
      {OpConfBuilder("concat", "c")
           .Input("in", std::vector<std::string>{"x", "y"})
           .Output("out")
           .Attr("axis", 1)
           .Build(),
       {{"x", Shape({6, 2, 7})}, {"y", Shape({6, 3, 7})}},
       3},
      {OpConfBuilder("slice", "s")
           .Input("x", "x")
           .Output("y")
           .Attr("start", start)
           .Attr("stop", stop)
           .Attr("step", step)
           .Build(),
       {{"x", Shape({6, 5, 7})}},
       3},
      {OpConfBuilder("slice_grad", "sg")
           .Input("dy", "x")
           .Input("like", "y")
           .Output("dx")
           .Attr("start", start)
           .Attr("stop", stop)
           .Attr("step", step)
           .Build(),
       {{"x", Shape({6, 2, 7})}, {"y", Shape({6, 5, 7})}},
       3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op.DebugString());
    ExpectAllConsistent(c);
  }
}

// Micro-batch row selections (api/micro_batches.h): rows k, k + M, ... of a
// batch split S(0) stay S(0) when every part holds a multiple of M rows, on
// 2 and 3 devices, for the slice and its gradient; not otherwise.
TEST(SbpTest, StridedRowSelectionKeepsTheBatchSplit) {
  const int64_t end = std::numeric_limits<int64_t>::max();
  auto has_split0 = [](const SbpCheckResult& result, const std::string& prefix) {
    for (const SbpSignature& sig : result.signatures) {
      if (sig.ToString().rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  for (int64_t k : {0, 1}) {
    const OpConf slice = OpConfBuilder("slice", "mb")
                             .Input("x", "x")
                             .Output("y")
                             .Attr("start", std::vector<int64_t>{k, 0})
                             .Attr("stop", std::vector<int64_t>{end, end})
                             .Attr("step", std::vector<int64_t>{2, 1})
                             .Build();
    const OpConf grad = OpConfBuilder("slice_grad", "mbg")
                            .Input("dy", "dy")
                            .Input("like", "x")
                            .Output("dx")
                            .Attr("start", std::vector<int64_t>{k, 0})
                            .Attr("stop", std::vector<int64_t>{end, end})
                            .Attr("step", std::vector<int64_t>{2, 1})
                            .Build();
    TensorMap env;
    env.emplace("x", Random(Shape({12, 5}), 3));
    env.emplace("dy", Random(Shape({6, 5}), 4));
    for (int64_t n : {2, 3}) {
      auto result = CheckSbpSignatures(slice, env, n);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_TRUE(has_split0(*result, "S(0) -> S(0)")) << "n=" << n << " k=" << k;
      auto grad_result = CheckSbpSignatures(grad, env, n);
      ASSERT_TRUE(grad_result.ok()) << grad_result.status();
      EXPECT_TRUE(has_split0(*grad_result, "S(0), S(0) -> S(0)")) << "n=" << n << " k=" << k;
    }
    // 10 rows over 2 devices: 5 each, not a multiple of 2.
    TensorMap odd;
    odd.emplace("x", Random(Shape({10, 5}), 3));
    auto result = CheckSbpSignatures(slice, odd, 2);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_FALSE(has_split0(*result, "S(0) -> S(0)"));
  }
}

// The checker itself must reject wrong signatures.
TEST(SbpTest, CheckerRejectsInconsistentSignatures) {
  TensorMap env;
  env.emplace("x", Random(Shape({6, 5}), 1));
  env.emplace("y", Random(Shape({5, 4}), 2));
  OpConf scalar_add =
      OpConfBuilder("scalar_add", "sa").Input("in", "x").Output("out").Attr("value", 1.0).Build();
  SbpSignature partial{{PartialSumSbp()}, {PartialSumSbp()}};
  EXPECT_FALSE(CheckSbpSignature(scalar_add, env, partial, 2).ok());

  OpConf matmul =
      OpConfBuilder("matmul", "mm").Input("a", "x").Input("b", "y").Output("out").Build();
  SbpSignature wrong{{SplitSbp(1), BroadcastSbp()}, {SplitSbp(0)}};
  EXPECT_FALSE(CheckSbpSignature(matmul, env, wrong, 2).ok());
  SbpSignature right{{SplitSbp(0), BroadcastSbp()}, {SplitSbp(0)}};
  EXPECT_TRUE(CheckSbpSignature(matmul, env, right, 2).ok());

  OpConf mean = OpConfBuilder("reduce_mean", "m")
                    .Input("x", "x")
                    .Output("y")
                    .Attr("axis", std::vector<int64_t>{0})
                    .Build();
  SbpSignature split_reduced{{SplitSbp(0)}, {PartialSumSbp()}};
  EXPECT_FALSE(CheckSbpSignature(mean, env, split_reduced, 2).ok());
}

}  // namespace
}  // namespace math
}  // namespace oflite
