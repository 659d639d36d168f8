// batch_norm / batch_norm_grad: CPU kernels against a double reference in
// training and inference mode (including the in-place running-statistics
// update) at sizes 0, 1 and odd; finite-difference checks of the gradient
// rule (through y, mean and inv_variance); the exact SBP signatures. The
// float32 kernels (blocks summed in float lanes, combined in double) against
// the double reference at ResNet and odd sizes, data far from zero included,
// and the same bits on 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
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

// dmean/dinv_variance from the lbns "dmean" and "dinv" when stats_grads.
OpConf BatchNormGrad(bool training, bool stats_grads) {
  OpConfBuilder b("batch_norm_grad", "g");
  b.Input("dy", "dy")
      .Input("x", "x")
      .Input("mean", "bn/mean_0")
      .Input("inv_variance", "bn/inv_variance_0")
      .Input("gamma", "gamma");
  if (stats_grads) b.Input("dmean", "dmean").Input("dinv_variance", "dinv");
  return b.Output("dx").Output("dgamma").Output("dbeta").Attr("training", training).Build();
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
  const OpConf grad = BatchNormGrad(true, false);
  TensorMap out = MustRun(grad, &env);
  EXPECT_EQ(ToDoubles(out.at("g/dgamma_0")), std::vector<double>(3, 0.0));
  EXPECT_EQ(ToDoubles(out.at("g/dbeta_0")), std::vector<double>(3, 0.0));
  EXPECT_EQ(out.at("g/dx_0").elem_count(), 0);
}

// ---- float32 accuracy and thread counts ----

// Shapes that reach every case of the float32 kernel: ResNet's stem and
// blocks (runs of 784, 196 and 49 values: whole lanes, and 4 or 1 values
// left over), S = 1 (one value per run), N = 1, S longer than one block
// (5000 values: a run cut into 3 blocks, the last partial), C prime (no
// thread count divides it), S not a multiple of 16 (17, 33).
std::vector<Shape> FloatShapes() {
  return {Shape({32, 8, 28, 28}), Shape({32, 8, 14, 14}), Shape({64, 16, 7, 7}),
          Shape({301, 7}),        Shape({1, 5, 17}),      Shape({2, 3, 5000}),
          Shape({37, 11, 3, 11}), Shape({9, 13, 33, 1})};
}

// x uniform in [offset - 2, offset + 3]: an offset 1000 times the spread
// is where a sum-of-squares variance would lose every digit in float.
TensorMap FloatEnv(const Shape& shape, double offset, uint64_t seed, bool grads) {
  TensorMap env = Env(shape, DT_FLOAT, seed);
  env["x"] = RandomTensor(TensorDesc(shape, DT_FLOAT), seed + 10, offset - 2, offset + 3);
  if (grads) {
    const Shape channel{shape.dim(1)};
    env.emplace("dy", RandomTensor(TensorDesc(shape, DT_FLOAT), seed + 11));
    env.emplace("dmean", RandomTensor(TensorDesc(channel, DT_FLOAT), seed + 12));
    env.emplace("dinv", RandomTensor(TensorDesc(channel, DT_FLOAT), seed + 13));
  }
  return env;
}

TensorMap ToDoubleEnv(const TensorMap& env) {
  TensorMap doubles;
  for (const auto& [lbn, t] : env)
    doubles.emplace(lbn, HostTensor::FromVector(t.shape(), ToDoubles(t)));
  return doubles;
}

// Largest |got - want| / scale over the elements.
double MaxError(const std::vector<double>& got, const std::vector<double>& want, double scale) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]) / scale);
  return worst;
}

double MaxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

// The largest error / bound ratio seen per quantity (printed, so the
// margin under each bound is on record).
class Worst {
 public:
  // Expects error <= bound and records the ratio under `quantity`.
  bool Check(const std::string& quantity, double error, double bound, const std::string& what) {
    double& worst = ratios_[quantity];
    worst = std::max(worst, error / bound);
    EXPECT_LE(error, bound) << what << " " << quantity;
    return error <= bound;
  }
  void Print() const {
    for (const auto& [quantity, ratio] : ratios_) {
      std::printf("  %-16s worst error / bound %.3f\n", quantity.c_str(), ratio);
    }
  }

 private:
  std::map<std::string, double> ratios_;
};

// The float32 forward against the double reference of the same (float)
// inputs. Bounds asserted, with the offset data included (x in
// [o - 2, o + 3], o = 0 or 5000; ulp = ulp of |mean| as a float):
//   mean:  |error| <= 1e-6 * 5 (the spread) + ulp / 2 (the rounding of the
//          float output alone; at offset 5000 it is nearly all the error);
//   moving_mean: |error| <= 1e-6 * 5 + 6e-8 * |moving_mean|;
//   inv_variance, moving_variance: relative error <= 2e-6 (the variance
//          comes from deviations, not from sums of squares: no loss at the
//          offset; observed 2.5e-7);
//   y:     |error| <= 2e-5 * max(1, |y|) + |gamma| * inv * ulp (x - mean in
//          float carries the rounding of mean itself).
TEST(BatchNormFloatTest, StatisticsAndOutputsStayCloseToDoubleEvenFarFromZero) {
  Worst worst;
  for (const Shape& shape : FloatShapes()) {
    for (double offset : {0.0, 5000.0}) {
      TensorMap env = FloatEnv(shape, offset, 7, false);
      const Expected want = Reference(env, true, 0.8, 1e-3);
      TensorMap out = MustRun(BatchNorm(true), &env);
      const std::string what = shape.ToString() + " offset " + std::to_string(offset);
      const std::vector<double> mean = ToDoubles(out.at("bn/mean_0"));
      const std::vector<double> inv = ToDoubles(out.at("bn/inv_variance_0"));
      const std::vector<double> y = ToDoubles(out.at("bn/y_0"));
      const std::vector<double> gamma = ToDoubles(env.at("gamma"));
      const std::vector<double> moving_mean = ToDoubles(env.at("mm"));
      const std::vector<double> moving_var = ToDoubles(env.at("mv"));
      const int64_t c = shape.dim(1), s = shape.elem_count() / (shape.dim(0) * c);
      for (int64_t k = 0; k < c; ++k) {
        const std::string channel = what + " channel " + std::to_string(k);
        const double ulp = std::ldexp(1.0, std::ilogb(std::fabs(want.mean[k])) - 23);
        worst.Check("mean", std::fabs(mean[k] - want.mean[k]), 5e-6 + ulp / 2, channel);
        worst.Check("moving_mean", std::fabs(moving_mean[k] - want.moving_mean[k]),
                    5e-6 + 6e-8 * std::fabs(want.moving_mean[k]), channel);
        worst.Check("inv_variance", std::fabs(inv[k] / want.inv[k] - 1), 2e-6, channel);
        worst.Check("moving_variance", std::fabs(moving_var[k] / want.moving_var[k] - 1), 2e-6,
                    channel);
        const double y_slack = std::fabs(gamma[k]) * want.inv[k] * ulp;
        for (int64_t b = 0; b < shape.dim(0); ++b) {
          for (int64_t i = 0; i < s; ++i) {
            const int64_t at = (b * c + k) * s + i;
            const double bound = 2e-5 * std::max(1.0, std::fabs(want.y[at])) + y_slack;
            if (!worst.Check("y", std::fabs(y[at] - want.y[at]), bound,
                             channel + " element " + std::to_string(at))) {
              return;
            }
          }
        }
      }
    }
  }
  worst.Print();
}

// The float32 gradient against the float64 kernel (itself checked by finite
// differences above) on the same inputs and statistics. Bounds: dbeta and
// dgamma within 1e-7 of sum |dy| (the float lanes add ~2048 values per
// block; observed 2e-8), dx within 1e-6 of max |dx| (observed 1.2e-7).
TEST(BatchNormFloatTest, GradMatchesTheFloat64Kernel) {
  Worst worst;
  for (const Shape& shape : FloatShapes()) {
    for (bool training : {true, false}) {
      for (bool stats_grads : {false, true}) {
        if (stats_grads && !training) continue;
        const std::string what = shape.ToString() + (training ? " training" : " inference") +
                                 (stats_grads ? " with dmean" : "");
        TensorMap env = FloatEnv(shape, 3.0, 17, true);
        TensorMap forward = MustRun(BatchNorm(training), &env);
        for (auto& [lbn, t] : forward) env[lbn] = t.Clone();
        TensorMap doubles = ToDoubleEnv(env);
        const TensorMap got = MustRun(BatchNormGrad(training, stats_grads), &env);
        const TensorMap want = MustRun(BatchNormGrad(training, stats_grads), &doubles);
        double dy_abs = 0;
        for (double v : ToDoubles(env.at("dy"))) dy_abs += std::fabs(v);
        for (const char* lbn : {"g/dbeta_0", "g/dgamma_0"}) {
          worst.Check(lbn, MaxError(ToDoubles(got.at(lbn)), ToDoubles(want.at(lbn)), 1.0),
                      1e-7 * std::max(1.0, dy_abs), what);
        }
        const std::vector<double> dx = ToDoubles(want.at("g/dx_0"));
        worst.Check("g/dx_0", MaxError(ToDoubles(got.at("g/dx_0")), dx, 1.0), 1e-6 * MaxAbs(dx),
                    what);
      }
    }
  }
  worst.Print();
}

// Runs `op` on a copy of env per thread count 1, 2, 3 (the running
// statistics are updated in place, so each run starts from the same ones)
// and expects every output, and the updated running statistics, to have
// the first run's bytes.
void ExpectSameBitsOnThreads(const OpConf& op, const TensorMap& env, const std::string& what) {
  const int before = CpuComputeThreadsSetting();
  std::vector<TensorMap> outs;
  for (int threads : {1, 2, 3}) {
    SetCpuComputeThreads(threads);
    TensorMap copy;
    for (const auto& [lbn, t] : env) copy.emplace(lbn, t.Clone());
    TensorMap out = MustRun(op, &copy);
    for (const char* lbn : {"mm", "mv"})
      out.emplace(std::string("updated ") + lbn, copy.at(lbn).Clone());
    outs.push_back(std::move(out));
  }
  SetCpuComputeThreads(before > 0 ? before : 1);
  for (size_t run = 1; run < outs.size(); ++run) {
    ASSERT_EQ(outs[run].size(), outs[0].size()) << what;
    for (const auto& [lbn, first] : outs[0]) {
      const HostTensor& other = outs[run].at(lbn);
      ASSERT_EQ(other.ByteSize(), first.ByteSize()) << what << " " << lbn;
      EXPECT_EQ(std::memcmp(other.raw(), first.raw(), first.ByteSize()), 0)
          << what << " " << lbn << ": " << run + 1 << " threads differ from one";
    }
  }
}

TEST(BatchNormFloatTest, SameBitsOnOneTwoAndThreeThreads) {
  // Large enough to be split: C = 8 goes by channels on 2 threads and by
  // blocks on 3; C = 3 the other way round; rows of under 1024 values per
  // thread ([., 11, 7, 7], [20000, 5]) by blocks on both.
  for (const Shape& shape : {Shape({32, 8, 28, 28}), Shape({16, 3, 40, 41}), Shape({64, 11, 7, 7}),
                             Shape({4, 3, 9000}), Shape({20000, 5})}) {
    for (DataType dtype : FloatTypes()) {
      for (bool training : {true, false}) {
        const std::string what = std::string(DataTypeName(dtype)) + " " + shape.ToString() +
                                 (training ? " training" : " inference");
        TensorMap env = FloatEnv(shape, 1.0, 3, true);
        if (dtype == DT_DOUBLE) env = ToDoubleEnv(env);
        ExpectSameBitsOnThreads(BatchNorm(training), env, "batch_norm " + what);
        TensorMap forward = MustRun(BatchNorm(training), &env);
        for (auto& [lbn, t] : forward) env[lbn] = t.Clone();
        for (bool stats_grads : {false, true}) {
          ExpectSameBitsOnThreads(BatchNormGrad(training, stats_grads), env,
                                  "batch_norm_grad " + what + (stats_grads ? " with dmean" : ""));
        }
      }
    }
  }
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
