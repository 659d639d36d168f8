// Checks every differentiable math op's gradient rule against finite
// differences in float64 (CheckOpGradient), over sizes including 1 and odd.
#include <gtest/gtest.h>

#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

HostTensor Random(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return RandomTensor(TensorDesc(shape, DT_DOUBLE), seed, lo, hi);
}

// Builds env {"x": .., "y": ..} for binary ops.
TensorMap Env2(const std::string& a, const Shape& sa, const std::string& b, const Shape& sb,
               uint64_t seed, double lo = -1.0, double hi = 1.0) {
  TensorMap env;
  env.emplace(a, Random(sa, seed, lo, hi));
  env.emplace(b, Random(sb, seed + 1, lo, hi));
  return env;
}

TEST(MathGradTest, Matmul) {
  const std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {3, 5, 7}, {7, 1, 3}};
  for (const auto& [m, k, n] : sizes) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      OpConf op = OpConfBuilder("matmul", "mm")
                      .Input("a", "a")
                      .Input("b", "b")
                      .Output("out")
                      .Attr("transpose_a", ta)
                      .Attr("transpose_b", tb)
                      .Attr("alpha", t == 2 ? -1.5 : 1.0)
                      .Build();
      TensorMap env = Env2("a", ta ? Shape({k, m}) : Shape({m, k}), "b",
                           tb ? Shape({n, k}) : Shape({k, n}), 100 + t);
      EXPECT_TRUE(CheckOpGradient(op, env).ok())
          << CheckOpGradient(op, env) << " m=" << m << " k=" << k << " n=" << n;
    }
  }
}

TEST(MathGradTest, BiasAdd) {
  for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{{Shape({3, 5}), 1},
                                                                          {Shape({7, 1, 9}), 2},
                                                                          {Shape({7, 3, 2}), 1},
                                                                          {Shape({4}), 0},
                                                                          {Shape({1, 1}), 0}}) {
    OpConf op = OpConfBuilder("bias_add", "ba")
                    .Input("a", "a")
                    .Input("b", "b")
                    .Output("out")
                    .Attr("axis", axis)
                    .Build();
    TensorMap env = Env2("a", shape, "b", Shape({shape.dim(axis)}), 7);
    EXPECT_TRUE(CheckOpGradient(op, env).ok()) << CheckOpGradient(op, env) << shape;
  }
}

TEST(MathGradTest, AddN) {
  TensorMap env;
  for (int i = 0; i < 3; ++i) env.emplace("in" + std::to_string(i), Random(Shape({3, 5}), 20 + i));
  OpConf op = OpConfBuilder("add", "s").Input("in", {"in0", "in1", "in2"}).Output("out").Build();
  EXPECT_TRUE(CheckOpGradient(op, env).ok()) << CheckOpGradient(op, env);
}

TEST(MathGradTest, BroadcastingSubMulDiv) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {Shape({3, 5}), Shape({3, 5})}, {Shape({3, 5}), Shape({5})},
      {Shape({3, 1}), Shape({1, 5})}, {Shape({7, 1, 9}), Shape({4, 1})},
      {Shape({1}), Shape({2, 3})},    {Shape({1, 1}), Shape({1, 1})}};
  for (const char* type : {"sub", "mul", "div"}) {
    for (const auto& [sx, sy] : shapes) {
      OpConf op = OpConfBuilder(type, "b").Input("x", "x").Input("y", "y").Output("out").Build();
      // Keep y away from 0 for div.
      TensorMap env = Env2("x", sx, "y", sy, 30, 0.5, 2.0);
      EXPECT_TRUE(CheckOpGradient(op, env).ok())
          << CheckOpGradient(op, env) << " " << type << " " << sx << " " << sy;
    }
  }
}

TEST(MathGradTest, ScalarOps) {
  for (const auto& [type, key, value] :
       std::vector<std::tuple<std::string, std::string, double>>{{"scalar_add", "value", 2.5},
                                                                 {"scalar_mul", "value", -3.0},
                                                                 {"scalar_pow", "exponent", 3.0},
                                                                 {"scalar_pow", "exponent", 0.5}}) {
    OpConf op = OpConfBuilder(type, "s").Input("in", "x").Output("out").Attr(key, value).Build();
    TensorMap env;
    env.emplace("x", Random(Shape({7, 1, 9}), 40, 0.5, 2.0));
    EXPECT_TRUE(CheckOpGradient(op, env).ok()) << CheckOpGradient(op, env) << " " << type;
  }
}

TEST(MathGradTest, Activations) {
  for (const char* type : {"relu", "sigmoid", "tanh", "gelu"}) {
    OpConf op = OpConfBuilder(type, "act").Input("x", "x").Output("y").Build();
    TensorMap env;
    HostTensor x = Random(Shape({3, 5}), 50, -2.0, 2.0);
    // Keep relu's inputs away from its kink.
    for (int64_t i = 0; i < x.elem_count(); ++i) {
      double& v = x.data<double>()[i];
      if (std::abs(v) < 0.05) v = 0.1;
    }
    env.emplace("x", std::move(x));
    EXPECT_TRUE(CheckOpGradient(op, env).ok()) << CheckOpGradient(op, env) << " " << type;
  }
}

TEST(MathGradTest, Reductions) {
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
    bool keepdims;
  };
  for (const Case& c : std::vector<Case>{{Shape({3, 5}), {0}, false},
                                         {Shape({3, 5}), {}, false},
                                         {Shape({7, 1, 9}), {0, 2}, true},
                                         {Shape({7, 3, 2}), {-1}, false},
                                         {Shape({1, 1}), {1}, true}}) {
    for (const char* type : {"reduce_sum", "reduce_mean"}) {
      OpConf op = OpConfBuilder(type, "r")
                      .Input("x", "x")
                      .Output("y")
                      .Attr("axis", c.axes)
                      .Attr("keepdims", c.keepdims)
                      .Build();
      TensorMap env;
      env.emplace("x", Random(c.shape, 60));
      EXPECT_TRUE(CheckOpGradient(op, env).ok()) << CheckOpGradient(op, env) << type << c.shape;
    }
  }
}

TEST(MathGradTest, BroadcastLike) {
  struct Case {
    Shape x, like;
    std::vector<int64_t> axes;
  };
  for (const Case& c : std::vector<Case>{{Shape({5}), Shape({3, 5}), {0}},
                                         {Shape({7, 1, 1}), Shape({7, 1, 9}), {2}},
                                         {Shape({1, 9}), Shape({7, 3, 9}), {}},
                                         {Shape({}), Shape({3, 5}), {0, 1}}}) {
    OpConf op = OpConfBuilder("broadcast_like", "bl")
                    .Input("x", "x")
                    .Input("like", "like")
                    .Output("y")
                    .Attr("axis", c.axes)
                    .Build();
    TensorMap env = Env2("x", c.x, "like", c.like, 70);
    EXPECT_TRUE(CheckOpGradient(op, env).ok()) << CheckOpGradient(op, env) << c.x;
  }
}

TEST(MathGradTest, ReshapeFamily) {
  TensorMap env;
  env.emplace("x", Random(Shape({7, 1, 9}), 80));
  env.emplace("like", Random(Shape({9, 7}), 81));
  std::vector<OpConf> ops = {
      OpConfBuilder("reshape", "r")
          .Input("x", "x")
          .Output("y")
          .Attr("shape", Shape({-1, 3}))
          .Build(),
      OpConfBuilder("flatten", "f").Input("x", "x").Output("y").Build(),
      OpConfBuilder("flatten", "f0").Input("x", "x").Output("y").Attr("start_dim", 0).Build(),
      OpConfBuilder("reshape_like", "rl").Input("x", "x").Input("like", "like").Output("y").Build(),
      OpConfBuilder("identity", "i").Input("in", "x").Output("out").Build(),
      OpConfBuilder("zeros_like", "z").Input("like", "x").Output("out").Build(),
      OpConfBuilder("cast", "c").Input("in", "x").Output("out").Attr("dtype", DT_DOUBLE).Build(),
      OpConfBuilder("transpose", "t")
          .Input("x", "x")
          .Output("y")
          .Attr("perm", std::vector<int64_t>{2, 0, 1})
          .Build(),
  };
  for (const OpConf& op : ops) {
    EXPECT_TRUE(CheckOpGradient(op, env).ok()) << CheckOpGradient(op, env) << op.op_type();
  }
}

TEST(MathGradTest, ConcatSliceAndSliceGrad) {
  TensorMap env;
  env.emplace("a", Random(Shape({3, 2}), 90));
  env.emplace("b", Random(Shape({3, 1}), 91));
  env.emplace("c", Random(Shape({3, 4}), 92));
  OpConf concat = OpConfBuilder("concat", "cat")
                      .Input("in", {"a", "b", "c"})
                      .Output("out")
                      .Attr("axis", 1)
                      .Build();
  EXPECT_TRUE(CheckOpGradient(concat, env).ok()) << CheckOpGradient(concat, env);

  env.emplace("x", Random(Shape({7, 1, 9}), 93));
  OpConf slice = OpConfBuilder("slice", "s")
                     .Input("x", "x")
                     .Output("y")
                     .Attr("start", std::vector<int64_t>{1, 0, -8})
                     .Attr("stop", std::vector<int64_t>{7, 1, 9})
                     .Attr("step", std::vector<int64_t>{2, 1, 3})
                     .Build();
  EXPECT_TRUE(CheckOpGradient(slice, env).ok()) << CheckOpGradient(slice, env);

  env.emplace("dy", Random(Shape({3, 1, 3}), 94));
  OpConf slice_grad = OpConfBuilder("slice_grad", "sg")
                          .Input("dy", "dy")
                          .Input("like", "x")
                          .Output("dx")
                          .Attr("start", std::vector<int64_t>{1, 0, -8})
                          .Attr("stop", std::vector<int64_t>{7, 1, 9})
                          .Attr("step", std::vector<int64_t>{2, 1, 3})
                          .Build();
  EXPECT_TRUE(CheckOpGradient(slice_grad, env).ok()) << CheckOpGradient(slice_grad, env);
}

}  // namespace
}  // namespace oflite
