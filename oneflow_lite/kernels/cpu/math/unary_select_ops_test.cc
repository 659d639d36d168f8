// The unary math ops (exp, log, sqrt, rsqrt, abs, neg, clamp, leaky_relu,
// silu) and the selecting ops (maximum, minimum, where): CPU kernels against
// direct references in float32/float64 at sizes 0, 1 and odd, the NaN, tie
// and bound rules of docs/ops.md, finite-difference gradient checks of every
// rule, and every offered SBP signature on 2 and 3 devices.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace math {
namespace {

const std::vector<Shape>& Sizes() {
  static const std::vector<Shape> sizes = {Shape({0}), Shape({1}), Shape({3, 5}), Shape({7, 1, 3})};
  return sizes;
}

struct UnaryCase {
  std::string type;
  std::function<double(double)> f, derivative;
  double lo, hi;  // input range (kept off kinks and the domain's edge)
  std::vector<std::pair<std::string, double>> attrs;
};

std::vector<UnaryCase> UnaryCases() {
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  return {
      {"exp", [](double x) { return std::exp(x); }, [](double x) { return std::exp(x); }, -2, 2},
      {"log", [](double x) { return std::log(x); }, [](double x) { return 1 / x; }, 0.3, 3},
      {"sqrt", [](double x) { return std::sqrt(x); }, [](double x) { return 0.5 / std::sqrt(x); },
       0.3, 3},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); },
       [](double x) { return -0.5 * std::pow(x, -1.5); }, 0.3, 3},
      {"abs", [](double x) { return std::abs(x); }, [](double x) { return x > 0 ? 1.0 : -1.0; }, -2,
       2},
      {"neg", [](double x) { return -x; }, [](double) { return -1.0; }, -2, 2},
      {"clamp",
       [](double x) { return std::min(std::max(x, -0.5), 0.75); },
       [](double x) { return x >= -0.5 && x <= 0.75 ? 1.0 : 0.0; },
       -2,
       2,
       {{"min", -0.5}, {"max", 0.75}}},
      {"leaky_relu",
       [](double x) { return x > 0 ? x : 0.2 * x; },
       [](double x) { return x > 0 ? 1.0 : 0.2; },
       -2,
       2,
       {{"alpha", 0.2}}},
      {"silu", [=](double x) { return x * sigmoid(x); },
       [=](double x) { return sigmoid(x) * (1 + x * (1 - sigmoid(x))); }, -4, 4},
  };
}

OpConf UnaryOp(const UnaryCase& c) {
  OpConfBuilder b(c.type, "u");
  b.Input("x", "x").Output("y");
  for (const auto& [key, value] : c.attrs) b.Attr(key, value);
  return b.Build();
}

// Moves values within 0.05 of a kink (0 or a clamp bound) away from it.
HostTensor AwayFromKinks(HostTensor t) {
  for (int64_t i = 0; i < t.elem_count(); ++i) {
    double& v = t.data<double>()[i];
    for (double kink : {0.0, -0.5, 0.75}) {
      if (std::abs(v - kink) < 0.05) v = kink + 0.1;
    }
  }
  return t;
}

class UnarySelectKernelTest : public ::testing::TestWithParam<DataType> {
 protected:
  DataType dtype() const { return GetParam(); }
  HostTensor Random(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
    return RandomTensor(TensorDesc(shape, dtype()), seed, lo, hi);
  }
};

TEST_P(UnarySelectKernelTest, UnaryOpsAndTheirGradientsMatchReferences) {
  uint64_t seed = 1;
  for (const UnaryCase& c : UnaryCases()) {
    for (const Shape& shape : Sizes()) {
      TensorMap env;
      env.emplace("x", Random(shape, ++seed, c.lo, c.hi));
      env.emplace("dy", Random(shape, ++seed));
      auto y = RunSingle(UnaryOp(c), &env, "u/y_0");
      ASSERT_TRUE(y.ok()) << y.status();
      const std::vector<double> x = ToDoubles(env.at("x")), dy = ToDoubles(env.at("dy"));
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = c.f(x[i]);
      EXPECT_EQ(CompareValues(ToDoubles(*y), want, Tolerance(dtype())), "") << c.type << shape;
    }
  }
}

TEST_P(UnarySelectKernelTest, GradientOpsMatchDerivatives) {
  for (const UnaryCase& c : UnaryCases()) {
    const std::string grad_type = c.type + "_grad";
    if (!HasKernel(grad_type, DEVICE_CPU, dtype())) continue;  // rules built from other ops
    TensorMap env;
    env.emplace("x", Random(Shape({7, 3}), 3, c.lo, c.hi));
    env.emplace("dy", Random(Shape({7, 3}), 4));
    OpConfBuilder b(grad_type, "g");
    b.Input("dy", "dy").Input("x", "x").Output("dx");
    for (const auto& [key, value] : c.attrs) b.Attr(key, value);
    auto dx = RunSingle(b.Build(), &env, "g/dx_0");
    ASSERT_TRUE(dx.ok()) << dx.status();
    const std::vector<double> x = ToDoubles(env.at("x")), dy = ToDoubles(env.at("dy"));
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = dy[i] * (x[i] == 0 ? 0 : c.derivative(x[i]));
    EXPECT_EQ(CompareValues(ToDoubles(*dx), want, Tolerance(dtype())), "") << grad_type;
  }
}

// Broadcast index helper: element of `in` read at output index `index`.
int64_t Source(const std::vector<int64_t>& index, const Shape& in) {
  const int64_t lead = static_cast<int64_t>(index.size()) - in.rank();
  std::vector<int64_t> at(in.rank());
  for (int64_t i = 0; i < in.rank(); ++i) at[i] = in.dim(i) == 1 ? 0 : index[i + lead];
  return Ravel(at, in);
}

struct BroadcastCase {
  Shape x, y, out;
};
const std::vector<BroadcastCase>& BroadcastCases() {
  static const std::vector<BroadcastCase> cases = {
      {Shape({0}), Shape({1}), Shape({0})},
      {Shape({1}), Shape({1}), Shape({1})},
      {Shape({3, 5}), Shape({5}), Shape({3, 5})},
      {Shape({7, 1, 3}), Shape({5, 1}), Shape({7, 5, 3})}};
  return cases;
}

TEST_P(UnarySelectKernelTest, MaximumMinimumAndWhereBroadcast) {
  uint64_t seed = 50;
  for (const BroadcastCase& c : BroadcastCases()) {
    TensorMap env;
    env.emplace("x", Random(c.x, ++seed));
    env.emplace("y", Random(c.y, ++seed));
    env.emplace("c", RandomTensor(TensorDesc(c.out, DT_INT32), ++seed, 0, 2));
    const std::vector<double> x = ToDoubles(env.at("x")), y = ToDoubles(env.at("y"));
    const std::vector<double> cond = ToDoubles(env.at("c"));
    for (const char* type : {"maximum", "minimum", "where"}) {
      OpConfBuilder b(type, "s");
      if (std::string(type) == "where") b.Input("condition", "c");
      auto out =
          RunSingle(b.Input("x", "x").Input("y", "y").Output("out").Build(), &env, "s/out_0");
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->shape(), c.out);
      std::vector<double> want(c.out.elem_count());
      for (int64_t i = 0; i < c.out.elem_count(); ++i) {
        const std::vector<int64_t> index = Unravel(i, c.out);
        const double a = x[Source(index, c.x)], v = y[Source(index, c.y)];
        want[i] = std::string(type) == "maximum"   ? std::max(a, v)
                  : std::string(type) == "minimum" ? std::min(a, v)
                                                   : (cond[i] != 0 ? a : v);
      }
      EXPECT_EQ(CompareValues(ToDoubles(*out), want, 0), "") << type << c.x << c.y;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, UnarySelectKernelTest, ::testing::Values(DT_FLOAT, DT_DOUBLE),
                         [](const auto& info) { return std::string(DataTypeName(info.param)); });

HostTensor Doubles(const Shape& shape, const std::vector<double>& values) {
  HostTensor t(TensorDesc(shape, DT_DOUBLE));
  for (size_t i = 0; i < values.size(); ++i) t.data<double>()[i] = values[i];
  return t;
}

TEST(SelectRulesTest, NanPropagatesAndTiesSplitTheGradient) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TensorMap env;
  env.emplace("x", Doubles(Shape({4}), {nan, 1.0, 2.0, nan}));
  env.emplace("y", Doubles(Shape({4}), {1.0, nan, 2.0, nan}));
  env.emplace("dz", Doubles(Shape({4}), {1.0, 1.0, 1.0, 1.0}));
  for (const char* type : {"maximum", "minimum"}) {
    auto out =
        RunSingle(OpConfBuilder(type, "m").Input("x", "x").Input("y", "y").Output("out").Build(),
                  &env, "m/out_0");
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<double> got = ToDoubles(*out);
    EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1]) && std::isnan(got[3])) << type;
    EXPECT_EQ(got[2], 2.0) << type;
    auto dx = RunSingle(OpConfBuilder(std::string(type) + "_grad", "g")
                            .Input("dz", "dz")
                            .Input("x", "x")
                            .Input("y", "y")
                            .Output("dx")
                            .Build(),
                        &env, "g/dx_0");
    ASSERT_TRUE(dx.ok()) << dx.status();
    // x NaN: all of it; y NaN: none; tie: half; both NaN: all (each side).
    EXPECT_EQ(ToDoubles(*dx), (std::vector<double>{1.0, 0.0, 0.5, 1.0})) << type;
  }
}

TEST(SelectRulesTest, ClampPassesNanAndTheGradientAtTheBounds) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TensorMap env;
  env.emplace("x", Doubles(Shape({5}), {-1.0, -0.5, 0.25, 0.75, nan}));
  env.emplace("dy", Doubles(Shape({5}), {1.0, 1.0, 1.0, 1.0, 1.0}));
  auto y = RunSingle(OpConfBuilder("clamp", "c")
                         .Input("x", "x")
                         .Output("y")
                         .Attr("min", -0.5)
                         .Attr("max", 0.75)
                         .Build(),
                     &env, "c/y_0");
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<double> got = ToDoubles(*y);
  EXPECT_EQ(std::vector<double>(got.begin(), got.begin() + 4),
            (std::vector<double>{-0.5, -0.5, 0.25, 0.75}));
  EXPECT_TRUE(std::isnan(got[4]));
  auto dx = RunSingle(OpConfBuilder("clamp_grad", "g")
                          .Input("dy", "dy")
                          .Input("x", "x")
                          .Output("dx")
                          .Attr("min", -0.5)
                          .Attr("max", 0.75)
                          .Build(),
                      &env, "g/dx_0");
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(ToDoubles(*dx), (std::vector<double>{0.0, 1.0, 1.0, 1.0, 0.0}));
}

TEST(SelectRulesTest, BadAttributesAndDtypesAreInferenceErrors) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({3}), DT_FLOAT), 1));
  env.emplace("i", RandomTensor(TensorDesc(Shape({3}), DT_INT32), 1, 0, 3));
  auto no_bounds =
      RunSingle(OpConfBuilder("clamp", "c").Input("x", "x").Output("y").Build(), &env, "c/y_0");
  EXPECT_NE(no_bounds.status().message().find("'min' or 'max'"), std::string::npos)
      << no_bounds.status();
  auto crossed = RunSingle(OpConfBuilder("clamp", "c")
                               .Input("x", "x")
                               .Output("y")
                               .Attr("min", 1.0)
                               .Attr("max", 0.0)
                               .Build(),
                           &env, "c/y_0");
  EXPECT_NE(crossed.status().message().find("min 1 > max 0"), std::string::npos)
      << crossed.status();
  auto int_exp =
      RunSingle(OpConfBuilder("exp", "e").Input("x", "i").Output("y").Build(), &env, "e/y_0");
  EXPECT_NE(int_exp.status().message().find("op 'e' (exp)"), std::string::npos) << int_exp.status();
  auto float_cond = RunSingle(OpConfBuilder("where", "w")
                                  .Input("condition", "x")
                                  .Input("x", "x")
                                  .Input("y", "x")
                                  .Output("out")
                                  .Build(),
                              &env, "w/out_0");
  EXPECT_NE(float_cond.status().message().find("condition must be"), std::string::npos)
      << float_cond.status();
}

TensorMap RandomDoubles(const std::map<std::string, Shape>& shapes, uint64_t seed, double lo,
                        double hi) {
  TensorMap env;
  for (const auto& [lbn, shape] : shapes) {
    env.emplace(lbn, RandomTensor(TensorDesc(shape, DT_DOUBLE), ++seed, lo, hi));
  }
  return env;
}

TEST(UnarySelectGradTest, FiniteDifferencesAtSizesZeroOneAndOdd) {
  for (const UnaryCase& c : UnaryCases()) {
    for (const Shape& shape : Sizes()) {
      TensorMap env;
      env.emplace("x", AwayFromKinks(RandomTensor(TensorDesc(shape, DT_DOUBLE), 9, c.lo, c.hi)));
      Status status = CheckOpGradient(UnaryOp(c), env);
      EXPECT_TRUE(status.ok()) << status << " " << c.type << shape;
    }
  }
}

TEST(UnarySelectGradTest, MaximumMinimumWhereWithBroadcastingAndTies) {
  for (const BroadcastCase& c : BroadcastCases()) {
    for (const char* type : {"maximum", "minimum"}) {
      TensorMap env = RandomDoubles({{"x", c.x}, {"y", c.y}}, 20, -1, 1);
      // Make the first elements tie: the central difference then sees half.
      if (env.at("x").elem_count() > 0)
        env.at("x").data<double>()[0] = env.at("y").data<double>()[0];
      OpConf op = OpConfBuilder(type, "m").Input("x", "x").Input("y", "y").Output("out").Build();
      Status status = CheckOpGradient(op, env);
      EXPECT_TRUE(status.ok()) << status << " " << type << c.x << c.y;
    }
    TensorMap env = RandomDoubles({{"x", c.x}, {"y", c.y}}, 30, -1, 1);
    env.emplace("c", RandomTensor(TensorDesc(c.out, DT_INT32), 31, 0, 2));
    OpConf op = OpConfBuilder("where", "w")
                    .Input("condition", "c")
                    .Input("x", "x")
                    .Input("y", "y")
                    .Output("out")
                    .Build();
    Status status = CheckOpGradient(op, env);
    EXPECT_TRUE(status.ok()) << status << " where" << c.x << c.y;
  }
}

TEST(UnarySelectSbpTest, EveryOfferedSignatureAgreesWithOneDevice) {
  std::vector<std::pair<OpConf, std::map<std::string, Shape>>> cases;
  for (const UnaryCase& c : UnaryCases()) cases.push_back({UnaryOp(c), {{"x", Shape({6, 5})}}});
  for (const char* grad : {"abs_grad", "clamp_grad", "leaky_relu_grad", "silu_grad"}) {
    cases.push_back({OpConfBuilder(grad, "g")
                         .Input("dy", "dy")
                         .Input("x", "x")
                         .Output("dx")
                         .Attr("min", -0.5)
                         .Build(),
                     {{"dy", Shape({6, 5})}, {"x", Shape({6, 5})}}});
  }
  for (const char* type : {"maximum", "minimum"}) {
    cases.push_back({OpConfBuilder(type, "m").Input("x", "x").Input("y", "y").Output("out").Build(),
                     {{"x", Shape({6, 1, 5})}, {"y", Shape({4, 5})}}});
    cases.push_back({OpConfBuilder(std::string(type) + "_grad", "g")
                         .Input("dz", "dz")
                         .Input("x", "x")
                         .Input("y", "y")
                         .Output("dx")
                         .Build(),
                     {{"dz", Shape({6, 4, 5})}, {"x", Shape({6, 1, 5})}, {"y", Shape({4, 5})}}});
  }
  for (const auto& [op, shapes] : cases) {
    TensorMap env = RandomDoubles(shapes, 40, 0.3, 2);
    for (int64_t n : {2, 3}) {
      auto result = CheckSbpSignatures(op, env, n);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_GE(result->signatures.size(), 2u) << op.op_type();
    }
  }
  TensorMap env = RandomDoubles({{"x", Shape({6, 1, 5})}, {"y", Shape({4, 5})}}, 50, -1, 1);
  env.emplace("c", RandomTensor(TensorDesc(Shape({6, 4, 1}), DT_INT32), 51, 0, 2));
  OpConf where = OpConfBuilder("where", "w")
                     .Input("condition", "c")
                     .Input("x", "x")
                     .Input("y", "y")
                     .Output("out")
                     .Build();
  for (int64_t n : {2, 3}) {
    auto result = CheckSbpSignatures(where, env, n);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_GE(result->signatures.size(), 4u);  // S(0), S(1), S(2), P
  }
}

}  // namespace
}  // namespace math
}  // namespace oflite
