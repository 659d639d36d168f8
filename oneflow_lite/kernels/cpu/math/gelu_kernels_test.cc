// gelu and gelu_grad with approximate "none" (erf) and "tanh": values
// against the formulas in float32 and float64 at sizes 0, 1 and odd (float32
// runs the vectorized loops), the grad op against the derivative, the
// float32 erf form's tails, the same bits on any thread count,
// finite-difference checks of the rule (which keeps `approximate`), the
// unknown value rejected naming the op, and the SBP signatures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace math {
namespace {

const double kK0 = std::sqrt(2.0 / M_PI);
const double kK1 = 0.044715;

double Gelu(double x, bool tanh_form) {
  if (!tanh_form) return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  return 0.5 * x * (1 + std::tanh(kK0 * (x + kK1 * x * x * x)));
}

double GeluDerivative(double x, bool tanh_form) {
  if (!tanh_form) {
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
           x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  }
  const double t = std::tanh(kK0 * (x + kK1 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kK0 * (1 + 3 * kK1 * x * x);
}

OpConf GeluOp(const std::string& approximate) {
  return OpConfBuilder("gelu", "g")
      .Input("x", "x")
      .Output("y")
      .Attr("approximate", approximate)
      .Build();
}

OpConf GeluGradOp(const std::string& approximate) {
  return OpConfBuilder("gelu_grad", "gg")
      .Input("dy", "dy")
      .Input("x", "x")
      .Output("dx")
      .Attr("approximate", approximate)
      .Build();
}

const std::vector<Shape>& Sizes() {
  static const std::vector<Shape> sizes = {Shape({0}), Shape({1}), Shape({3, 5}),
                                           Shape({7, 1, 37})};
  return sizes;
}

TEST(GeluTest, ValuesAndGradOpMatchTheFormulas) {
  for (const std::string approximate : {"none", "tanh"}) {
    const bool tanh_form = approximate == "tanh";
    for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
      for (const Shape& shape : Sizes()) {
        TensorMap env;
        env.emplace("x", RandomTensor(TensorDesc(shape, dtype), 1, -6, 6));
        env.emplace("dy", RandomTensor(TensorDesc(shape, dtype), 2));
        const std::vector<double> x = ToDoubles(env.at("x")), dy = ToDoubles(env.at("dy"));
        std::vector<double> want_y(x.size()), want_dx(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          want_y[i] = Gelu(x[i], tanh_form);
          want_dx[i] = dy[i] * GeluDerivative(x[i], tanh_form);
        }
        auto y = RunSingle(GeluOp(approximate), &env, "g/y_0");
        ASSERT_TRUE(y.ok()) << y.status();
        EXPECT_EQ(CompareValues(ToDoubles(*y), want_y, Tolerance(dtype)), "")
            << approximate << " " << DataTypeName(dtype) << shape;
        auto dx = RunSingle(GeluGradOp(approximate), &env, "gg/dx_0");
        ASSERT_TRUE(dx.ok()) << dx.status();
        EXPECT_EQ(CompareValues(ToDoubles(*dx), want_dx, Tolerance(dtype)), "")
            << approximate << " grad " << DataTypeName(dtype) << shape;
      }
    }
  }
}

// Far tails and exact points of the float32 tanh form: gelu(0) = 0, large
// positive x gives x, large negative x gives 0, and no NaN or inf appears.
TEST(GeluTest, TanhFormTailsInFloat32) {
  const std::vector<float> values = {0.0f,   -0.0f,  1e-20f,  -1e-20f, 20.0f,
                                     -20.0f, 100.0f, -100.0f, 3e4f,    -3e4f};
  TensorMap env;
  env.emplace("x", HostTensor::FromVector<float>(Shape({10}), values));
  env.emplace("dy", HostTensor::FromVector<float>(Shape({10}), std::vector<float>(10, 1.0f)));
  auto y = RunSingle(GeluOp("tanh"), &env, "g/y_0");
  auto dx = RunSingle(GeluGradOp("tanh"), &env, "gg/dx_0");
  ASSERT_TRUE(y.ok() && dx.ok()) << y.status() << dx.status();
  const std::vector<double> got_y = ToDoubles(*y), got_dx = ToDoubles(*dx);
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    EXPECT_NEAR(got_y[i], x > 10 ? x : (x < -10 ? 0.0 : Gelu(x, true)), 1e-6 * (1 + std::fabs(x)))
        << "x = " << x;
    EXPECT_NEAR(got_dx[i], x > 10 ? 1.0 : (x < -10 ? 0.0 : GeluDerivative(x, true)), 1e-6)
        << "x = " << x;
  }
}

// The float32 erf form (a polynomial normal CDF) near exact points and in
// the far tails: gelu(0) = 0, x for large positive x, 0 for large negative
// x, and no NaN or inf.
TEST(GeluTest, ErfFormTailsInFloat32) {
  const std::vector<float> values = {0.0f,   -0.0f,  1e-20f,  -1e-20f, 20.0f,  -20.0f,
                                     100.0f, -100.0f, 3e4f,   -3e4f,   5.5f,   -5.5f};
  const int64_t n = static_cast<int64_t>(values.size());
  TensorMap env;
  env.emplace("x", HostTensor::FromVector<float>(Shape({n}), values));
  env.emplace("dy", HostTensor::FromVector<float>(Shape({n}), std::vector<float>(n, 1.0f)));
  auto y = RunSingle(GeluOp("none"), &env, "g/y_0");
  auto dx = RunSingle(GeluGradOp("none"), &env, "gg/dx_0");
  ASSERT_TRUE(y.ok() && dx.ok()) << y.status() << dx.status();
  const std::vector<double> got_y = ToDoubles(*y), got_dx = ToDoubles(*dx);
  for (int64_t i = 0; i < n; ++i) {
    const double x = values[i];
    EXPECT_NEAR(got_y[i], Gelu(x, false), 1e-7 * (1 + std::fabs(x))) << "x = " << x;
    EXPECT_NEAR(got_dx[i], GeluDerivative(x, false), 1e-6) << "x = " << x;
  }
}

// Both forms split their elements over threads: the same bits on 1, 2 and
// 3 threads, at the GPT's MLP size and at an odd one.
TEST(GeluTest, SameBitsOnAnyThreadCount) {
  const int before = CpuComputeThreadsSetting();
  for (const std::string approximate : {"none", "tanh"}) {
    for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
      for (const Shape& shape : {Shape({768, 512}), Shape({129, 257})}) {
        TensorMap env;
        env.emplace("x", RandomTensor(TensorDesc(shape, dtype), 8, -6, 6));
        env.emplace("dy", RandomTensor(TensorDesc(shape, dtype), 9));
        std::vector<HostTensor> ys, dxs;
        for (int threads : {1, 2, 3}) {
          SetCpuComputeThreads(threads);
          auto y = RunSingle(GeluOp(approximate), &env, "g/y_0");
          auto dx = RunSingle(GeluGradOp(approximate), &env, "gg/dx_0");
          ASSERT_TRUE(y.ok() && dx.ok()) << y.status() << dx.status();
          ys.push_back(std::move(*y));
          dxs.push_back(std::move(*dx));
        }
        for (size_t run = 1; run < ys.size(); ++run) {
          EXPECT_EQ(std::memcmp(ys[run].raw(), ys[0].raw(), ys[0].ByteSize()), 0)
              << approximate << " " << DataTypeName(dtype) << shape << " run " << run;
          EXPECT_EQ(std::memcmp(dxs[run].raw(), dxs[0].raw(), dxs[0].ByteSize()), 0)
              << approximate << " grad " << DataTypeName(dtype) << shape << " run " << run;
        }
      }
    }
  }
  SetCpuComputeThreads(before > 0 ? before : 1);
}

TEST(GeluTest, GradientsMatchFiniteDifferences) {
  for (const std::string approximate : {"none", "tanh"}) {
    for (const Shape& shape : Sizes()) {
      TensorMap env;
      env.emplace("x", RandomTensor(TensorDesc(shape, DT_DOUBLE), 3, -3, 3));
      Status status = CheckOpGradient(GeluOp(approximate), env);
      EXPECT_TRUE(status.ok()) << approximate << shape << ": " << status;
    }
  }
}

TEST(GeluTest, DefaultIsTheErfFormAndUnknownValuesNameTheOp) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({5}), DT_DOUBLE), 4));
  env.emplace("dy", RandomTensor(TensorDesc(Shape({5}), DT_DOUBLE), 5));
  auto plain =
      RunSingle(OpConfBuilder("gelu", "g").Input("x", "x").Output("y").Build(), &env, "g/y_0");
  auto none = RunSingle(GeluOp("none"), &env, "g/y_0");
  ASSERT_TRUE(plain.ok() && none.ok());
  EXPECT_EQ(ToDoubles(*plain), ToDoubles(*none));
  for (const OpConf& op : {GeluOp("sigmoid"), GeluGradOp("exact")}) {
    auto bad = RunSingle(op, &env, op.name() + (op.op_type() == "gelu" ? "/y_0" : "/dx_0"));
    const std::string prefix =
        "op '" + op.name() + "' (" + op.op_type() + "): attribute 'approximate'";
    EXPECT_NE(bad.status().message().find(prefix), std::string::npos) << bad.status();
  }
}

TEST(GeluTest, EveryOfferedSignatureAgreesWithOneDevice) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({6, 5}), DT_DOUBLE), 6, -3, 3));
  env.emplace("dy", RandomTensor(TensorDesc(Shape({6, 5}), DT_DOUBLE), 7));
  for (const OpConf& op : {GeluOp("tanh"), GeluGradOp("tanh")}) {
    for (int64_t n : {2, 3}) {
      auto result = CheckSbpSignatures(op, env, n);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_GE(result->signatures.size(), 2u) << op.op_type();
    }
  }
}

}  // namespace
}  // namespace math
}  // namespace oflite
