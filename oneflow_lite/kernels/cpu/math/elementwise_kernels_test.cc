// Elementwise kernels against direct references: broadcasting sub/mul/div,
// activations and their gradient ops, scalar ops, cast, zeros_like and
// constant.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"

namespace oflite {
namespace math {
namespace {

class ElementwiseKernelTest : public ::testing::TestWithParam<DataType> {
 protected:
  DataType dtype() const { return GetParam(); }
  double tol() const { return Tolerance(dtype()); }
  HostTensor Random(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
    return RandomTensor(TensorDesc(shape, dtype()), seed, lo, hi);
  }
};

// Index of an output element in a right-aligned broadcast operand.
int64_t BroadcastSource(const std::vector<int64_t>& out_index, const Shape& in) {
  const int64_t lead = static_cast<int64_t>(out_index.size()) - in.rank();
  std::vector<int64_t> index(in.rank());
  for (int64_t i = 0; i < in.rank(); ++i) index[i] = in.dim(i) == 1 ? 0 : out_index[i + lead];
  return Ravel(index, in);
}

TEST_P(ElementwiseKernelTest, BroadcastingBinaryOps) {
  struct Case {
    Shape x, y, out;
  };
  const std::vector<Case> cases = {
      {Shape({1, 1}), Shape({1, 1}), Shape({1, 1})},
      {Shape({3, 5}), Shape({3, 5}), Shape({3, 5})},
      {Shape({3, 5}), Shape({5}), Shape({3, 5})},
      {Shape({3, 1}), Shape({1, 5}), Shape({3, 5})},
      {Shape({7, 1, 9}), Shape({4, 1}), Shape({7, 4, 9})},
      {Shape({}), Shape({2, 3}), Shape({2, 3})},
      {Shape({5, 3}), Shape({0, 1, 3}), Shape({0, 5, 3})},
      {Shape({2, 1, 3, 1}), Shape({1, 4, 1, 5}), Shape({2, 4, 3, 5})},
  };
  const std::vector<std::pair<std::string, std::function<double(double, double)>>> ops = {
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    for (const auto& [type, fn] : ops) {
      TensorMap env;
      env.emplace("x", Random(c.x, ++seed));
      env.emplace("y", Random(c.y, ++seed, 0.5, 2.0));
      OpConf op = OpConfBuilder(type, "b").Input("x", "x").Input("y", "y").Output("out").Build();
      auto out = RunSingle(op, &env, "b/out_0");
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->shape(), c.out);
      const std::vector<double> x = ToDoubles(env.at("x")), y = ToDoubles(env.at("y"));
      std::vector<double> want(c.out.elem_count());
      for (int64_t i = 0; i < c.out.elem_count(); ++i) {
        const std::vector<int64_t> index = Unravel(i, c.out);
        want[i] = fn(x[BroadcastSource(index, c.x)], y[BroadcastSource(index, c.y)]);
      }
      EXPECT_EQ(CompareValues(ToDoubles(*out), want, tol()), "") << type << " " << c.x << c.y;
    }
  }
}

TEST_P(ElementwiseKernelTest, ActivationsAndGradients) {
  struct Case {
    std::string type, grad_type, saved;
    std::function<double(double)> f;
    std::function<double(double)> derivative;  // of x
  };
  const std::vector<Case> cases = {
      {"relu", "relu_grad", "y", [](double x) { return x > 0 ? x : 0; },
       [](double x) { return x > 0 ? 1.0 : 0.0; }},
      {"sigmoid", "sigmoid_grad", "y", [](double x) { return 1 / (1 + std::exp(-x)); },
       [](double x) {
         const double s = 1 / (1 + std::exp(-x));
         return s * (1 - s);
       }},
      {"tanh", "tanh_grad", "y", [](double x) { return std::tanh(x); },
       [](double x) { return 1 - std::tanh(x) * std::tanh(x); }},
      {"gelu", "gelu_grad", "x",
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       [](double x) {
         return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
                x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
       }},
  };
  for (const Shape& shape : {Shape({1}), Shape({3, 5}), Shape({7, 1, 9})}) {
    for (const Case& c : cases) {
      TensorMap env;
      env.emplace("x", Random(shape, 5, -4.0, 4.0));
      env.emplace("dy", Random(shape, 6));
      auto y =
          RunSingle(OpConfBuilder(c.type, "a").Input("x", "x").Output("y").Build(), &env, "a/y_0");
      ASSERT_TRUE(y.ok()) << y.status();
      const std::vector<double> x = ToDoubles(env.at("x")), dy = ToDoubles(env.at("dy"));
      std::vector<double> want_y(x.size()), want_dx(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        want_y[i] = c.f(x[i]);
        want_dx[i] = dy[i] * c.derivative(x[i]);
      }
      EXPECT_EQ(CompareValues(ToDoubles(*y), want_y, tol()), "") << c.type;
      env.emplace("y", std::move(*y));
      OpConf grad = OpConfBuilder(c.grad_type, "g")
                        .Input("dy", "dy")
                        .Input(c.saved, c.saved)
                        .Output("dx")
                        .Build();
      auto dx = RunSingle(grad, &env, "g/dx_0");
      ASSERT_TRUE(dx.ok()) << dx.status();
      // float32 sigmoid/tanh derivatives computed from a rounded y.
      EXPECT_EQ(CompareValues(ToDoubles(*dx), want_dx, dtype() == DT_FLOAT ? 1e-5 : 1e-10), "")
          << c.grad_type;
    }
  }
}

TEST_P(ElementwiseKernelTest, ScalarOps) {
  TensorMap env;
  env.emplace("x", Random(Shape({7, 1, 9}), 9, 0.1, 3.0));
  const std::vector<double> x = ToDoubles(env.at("x"));
  struct Case {
    std::string type, key;
    double value;
    std::function<double(double)> f;
  };
  for (const Case& c : std::vector<Case>{
           {"scalar_add", "value", 1.5, [](double v) { return v + 1.5; }},
           {"scalar_mul", "value", -2.0, [](double v) { return v * -2.0; }},
           {"scalar_pow", "exponent", 2.5, [](double v) { return std::pow(v, 2.5); }}}) {
    auto out = RunSingle(
        OpConfBuilder(c.type, "s").Input("in", "x").Output("out").Attr(c.key, c.value).Build(),
        &env, "s/out_0");
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = c.f(x[i]);
    EXPECT_EQ(CompareValues(ToDoubles(*out), want, tol()), "") << c.type;
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, ElementwiseKernelTest, ::testing::Values(DT_FLOAT, DT_DOUBLE),
                         [](const auto& info) { return std::string(DataTypeName(info.param)); });

TEST(CastKernelTest, BetweenFloatAndIntegerTypes) {
  const std::vector<DataType> types = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
  for (DataType from : types) {
    for (DataType to : types) {
      TensorMap env;
      env.emplace("x", RandomTensor(TensorDesc(Shape({3, 5}), from), 3, -50, 50));
      auto out = RunSingle(
          OpConfBuilder("cast", "c").Input("in", "x").Output("out").Attr("dtype", to).Build(), &env,
          "c/out_0");
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->dtype(), to);
      std::vector<double> want = ToDoubles(env.at("x"));
      const bool to_int = to == DT_INT32 || to == DT_INT64;
      for (double& w : want) {
        if (to_int) w = std::trunc(w);
        if (to == DT_FLOAT) w = static_cast<float>(w);
      }
      EXPECT_EQ(CompareValues(ToDoubles(*out), want, 0), "")
          << DataTypeName(from) << " -> " << DataTypeName(to);
    }
  }
}

TEST(ZerosLikeKernelTest, ZeroFillsEveryType) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
    TensorMap env;
    env.emplace("x", RandomTensor(TensorDesc(Shape({7, 1, 9}), dtype), 4, 1, 9));
    auto out = RunSingle(OpConfBuilder("zeros_like", "z").Input("like", "x").Output("out").Build(),
                         &env, "z/out_0");
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(ToDoubles(*out), std::vector<double>(63, 0.0)) << DataTypeName(dtype);
  }
}

TEST(ConstantKernelTest, FillsEveryElementAndRejectsBadAttrs) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (const Shape& shape : {Shape({}), Shape({4, 0}), Shape({3, 1, 5})}) {
      TensorMap env;
      auto out = RunSingle(OpConfBuilder("constant", "c")
                               .Output("out")
                               .Attr("shape", shape)
                               .Attr("dtype", dtype)
                               .Attr("value", 0.1)
                               .Build(),
                           &env, "c/out_0");
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->shape(), shape);
      EXPECT_EQ(out->dtype(), dtype);
      // 0.1 rounded once to the dtype, in every element.
      const double value = dtype == DT_FLOAT ? static_cast<double>(0.1f) : 0.1;
      EXPECT_EQ(ToDoubles(*out), std::vector<double>(shape.elem_count(), value))
          << DataTypeName(dtype) << " " << shape;
    }
  }
  TensorMap env;
  auto no_value = RunSingle(
      OpConfBuilder("constant", "c").Output("out").Attr("shape", Shape({2})).Build(), &env, "c/out_0");
  ASSERT_FALSE(no_value.ok());
  EXPECT_NE(no_value.status().message().find("value"), std::string::npos) << no_value.status();
  auto negative = RunSingle(OpConfBuilder("constant", "c")
                                .Output("out")
                                .Attr("shape", Shape({2, -1}))
                                .Attr("value", 1.0)
                                .Build(),
                            &env, "c/out_0");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("negative"), std::string::npos) << negative.status();
  auto integer = RunSingle(OpConfBuilder("constant", "c")
                               .Output("out")
                               .Attr("shape", Shape({2}))
                               .Attr("dtype", DT_INT32)
                               .Attr("value", 1.0)
                               .Build(),
                           &env, "c/out_0");
  ASSERT_FALSE(integer.ok());
  EXPECT_NE(integer.status().message().find("float32 or float64"), std::string::npos)
      << integer.status();
}

TEST(IdentityKernelTest, CopiesIntegerTensors) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({3, 5}), DT_INT64), 8, -100, 100));
  auto out = RunSingle(OpConfBuilder("identity", "i").Input("in", "x").Output("out").Build(), &env,
                       "i/out_0");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToDoubles(*out), ToDoubles(env.at("x")));
}

}  // namespace
}  // namespace math
}  // namespace oflite
