// batch_norm / batch_norm_grad: CPU kernels against a double reference in
// training and inference mode (including the in-place running-statistics
// update) at sizes 0, 1 and odd; finite-difference checks of the gradient
// rule (through y, mean and inv_variance); the exact SBP signatures.
#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace nn {
namespace {

using testing::FloatTypes;
using testing::MustRun;
using testing::ToDoubles;

OpConf BatchNorm(bool training, double momentum = 0.8, double epsilon = 1e-3) {
  return OpConfBuilder("batch_norm", "bn")
      .Input("x", "x")
      .Input("gamma", "gamma")
      .Input("beta", "beta")
      .Input("moving_mean", "mm")
      .Input("moving_variance", "mv")
      .Output("y")
      .Output("mean")
      .Output("inv_variance")
      .Attr("training", training)
      .Attr("momentum", momentum)
      .Attr("epsilon", epsilon)
      .Build();
}

TensorMap Env(const Shape& x, DataType dtype, uint64_t seed) {
  const Shape channel{x.dim(1)};
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(x, dtype), seed, -2, 3));
  env.emplace("gamma", RandomTensor(TensorDesc(channel, dtype), seed + 1, 0.5, 1.5));
  env.emplace("beta", RandomTensor(TensorDesc(channel, dtype), seed + 2, -1, 1));
  env.emplace("mm", RandomTensor(TensorDesc(channel, dtype), seed + 3, -1, 1));
  env.emplace("mv", RandomTensor(TensorDesc(channel, dtype), seed + 4, 0.5, 2));
  return env;
}

struct Expected {
  std::vector<double> y, mean, inv, moving_mean, moving_var;
};

// The formulas of docs/ops.md, written out per element.
Expected Reference(const TensorMap& env, bool training, double momentum, double epsilon) {
  const Shape& shape = env.at("x").shape();
  const int64_t n = shape.dim(0), c = shape.dim(1),
                s = shape.elem_count() / std::max<int64_t>(1, n * c);
  const std::vector<double> x = ToDoubles(env.at("x")), gamma = ToDoubles(env.at("gamma")),
                            beta = ToDoubles(env.at("beta"));
  Expected e{
      std::vector<double>(x.size()), {}, {}, ToDoubles(env.at("mm")), ToDoubles(env.at("mv"))};
  for (int64_t k = 0; k < c; ++k) {
    auto at = [&](int64_t b, int64_t i) { return (b * c + k) * s + i; };
    double mean = e.moving_mean[k], var = e.moving_var[k];
    const double m = static_cast<double>(n * s);
    if (training) {
      double sum = 0, squares = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < s; ++i) sum += x[at(b, i)];
      mean = sum / m;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < s; ++i) squares += (x[at(b, i)] - mean) * (x[at(b, i)] - mean);
      }
      var = squares / m;
      if (m > 0) {
        e.moving_mean[k] = momentum * e.moving_mean[k] + (1 - momentum) * mean;
        e.moving_var[k] =
            momentum * e.moving_var[k] + (1 - momentum) * (m > 1 ? var * m / (m - 1) : var);
      }
    }
    const double inv = 1 / std::sqrt(var + epsilon);
    e.mean.push_back(mean);
    e.inv.push_back(inv);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < s; ++i)
        e.y[at(b, i)] = (x[at(b, i)] - mean) * inv * gamma[k] + beta[k];
    }
  }
  return e;
}

// NaN equals NaN (the statistics of an empty batch).
void ExpectValues(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << " = " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << what << " " << i;
    }
  }
}

TEST(BatchNormKernelTest, TrainingAndInferenceMatchTheReferenceAtSizesZeroOneAndOdd) {
  for (DataType dtype : FloatTypes()) {
    for (const Shape& shape : {Shape({0, 3}), Shape({1, 3}), Shape({5, 3, 3, 1}), Shape({4, 1, 7}),
                               Shape({3, 2, 0, 5})}) {
      for (bool training : {true, false}) {
        TensorMap env = Env(shape, dtype, 11);
        const Expected want = Reference(env, training, 0.8, 1e-3);
        TensorMap out = MustRun(BatchNorm(training), &env);
        const std::string what = std::string(DataTypeName(dtype)) + " " + shape.ToString() +
                                 (training ? " training" : " inference");
        const double tol = testing::Tolerance(dtype) * 10;
        ExpectValues(ToDoubles(out.at("bn/y_0")), want.y, tol, what + " y");
        ExpectValues(ToDoubles(out.at("bn/mean_0")), want.mean, tol, what + " mean");
        ExpectValues(ToDoubles(out.at("bn/inv_variance_0")), want.inv, tol, what + " inv");
        ExpectValues(ToDoubles(env.at("mm")), want.moving_mean, tol, what + " moving_mean");
        ExpectValues(ToDoubles(env.at("mv")), want.moving_var, tol, what + " moving_variance");
      }
    }
  }
}

TEST(BatchNormKernelTest, RunningStatisticsConvergeToTheDataStatistics) {
  // The same batch again and again: moving_mean -> mean, moving_variance ->
  // the unbiased variance.
  TensorMap env = Env(Shape({6, 2, 2}), DT_DOUBLE, 5);
  TensorMap out;
  for (int i = 0; i < 200; ++i) out = MustRun(BatchNorm(true, 0.9), &env);
  const std::vector<double> mean = ToDoubles(out.at("bn/mean_0"));
  const std::vector<double> inv = ToDoubles(out.at("bn/inv_variance_0"));
  for (int c = 0; c < 2; ++c) {
    const double var = 1 / (inv[c] * inv[c]) - 1e-3;
    EXPECT_NEAR(env.at("mm").data<double>()[c], mean[c], 1e-6);
    EXPECT_NEAR(env.at("mv").data<double>()[c], var * 12 / 11, 1e-6);
  }
}

TEST(BatchNormKernelTest, BadShapesAndAttributesNameTheOp) {
  TensorMap env = Env(Shape({4, 3}), DT_FLOAT, 1);
  env.emplace("g2", RandomTensor(TensorDesc(Shape({2}), DT_FLOAT), 1));
  OpConf op = BatchNorm(true);
  op.mutable_input(1)->set_lbn(0, "g2");
  std::string error = testing::RunError(op, &env);
  EXPECT_NE(error.find("op 'bn' (batch_norm): gamma must be float32(3,)"), std::string::npos)
      << error;
  error = testing::RunError(BatchNorm(true, 1.5), &env);
  EXPECT_NE(error.find("momentum must be in [0, 1], got 1.5"), std::string::npos) << error;
}

TEST(BatchNormGradTest, FiniteDifferencesInBothModes) {
  GradCheckOptions options;
  options.skip_inputs = {"moving_mean", "moving_variance"};
  options.rtol = 1e-4;
  for (const Shape& shape : {Shape({1, 3}), Shape({5, 3, 3, 1}), Shape({3, 2, 1, 5})}) {
    for (bool training : {true, false}) {
      Status status = CheckOpGradient(BatchNorm(training), Env(shape, DT_DOUBLE, 21), options);
      EXPECT_TRUE(status.ok()) << status << " " << shape << (training ? " training" : " inference");
    }
  }
}

TEST(BatchNormGradTest, EmptyBatchGivesZeroParameterGradients) {
  TensorMap env = Env(Shape({0, 3, 2}), DT_DOUBLE, 3);
  TensorMap forward = MustRun(BatchNorm(true), &env);
  for (auto& [lbn, t] : forward) env.emplace(lbn, std::move(t));
  env.emplace("dy", HostTensor(TensorDesc(Shape({0, 3, 2}), DT_DOUBLE)));
  OpConf grad = OpConfBuilder("batch_norm_grad", "g")
                    .Input("dy", "dy")
                    .Input("x", "x")
                    .Input("mean", "bn/mean_0")
                    .Input("inv_variance", "bn/inv_variance_0")
                    .Input("gamma", "gamma")
                    .Output("dx")
                    .Output("dgamma")
                    .Output("dbeta")
                    .Build();
  TensorMap out = MustRun(grad, &env);
  EXPECT_EQ(ToDoubles(out.at("g/dgamma_0")), std::vector<double>(3, 0.0));
  EXPECT_EQ(ToDoubles(out.at("g/dbeta_0")), std::vector<double>(3, 0.0));
  EXPECT_EQ(out.at("g/dx_0").elem_count(), 0);
}

// The first `leading` inputs S(1), the other inputs S(0); y/dx S(1), the
// per-channel outputs S(0).
SbpSignature ChannelSplit(int inputs, int outputs, int leading = 1) {
  SbpSignature sig;
  sig.inputs.assign(inputs, SplitSbp(0));
  for (int i = 0; i < leading; ++i) sig.inputs[i] = SplitSbp(1);
  sig.outputs.assign(outputs, SplitSbp(0));
  sig.outputs[0] = SplitSbp(1);
  return sig;
}

TEST(BatchNormSbpTest, InferenceSignaturesAndTheChannelSplitAreExact) {
  TensorMap env = Env(Shape({6, 5, 4, 3}), DT_DOUBLE, 31);
  for (int64_t n : {2, 3}) {
    auto result = CheckSbpSignatures(BatchNorm(false), env, n);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->signatures.size(), 4u);  // S(0), S(2), S(3), channel S(1)
    Status status = CheckSbpSignature(BatchNorm(true), env, ChannelSplit(5, 3), n);
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(BatchNormSbpTest, GradSignaturesAreExactInInferenceAndOnChannels) {
  TensorMap env = Env(Shape({6, 5, 3}), DT_DOUBLE, 41);
  env.emplace("dy", RandomTensor(TensorDesc(Shape({6, 5, 3}), DT_DOUBLE), 42));
  auto grad = [](bool training) {
    return OpConfBuilder("batch_norm_grad", "g")
        .Input("dy", "dy")
        .Input("x", "x")
        .Input("mean", "mm")
        .Input("inv_variance", "mv")
        .Input("gamma", "gamma")
        .Output("dx")
        .Output("dgamma")
        .Output("dbeta")
        .Attr("training", training)
        .Build();
  };
  for (int64_t n : {2, 3}) {
    auto result = CheckSbpSignatures(grad(false), env, n);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->signatures.size(), 3u);  // S(0), S(2), channel
    Status status = CheckSbpSignature(grad(true), env, ChannelSplit(5, 3, 2), n);
    EXPECT_TRUE(status.ok()) << status;
  }
}

}  // namespace
}  // namespace nn
}  // namespace oflite
