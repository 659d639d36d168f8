// Update kernels against hand-computed values over several steps; the
// threaded kernels (adam, clip_scale) give the same bits on any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

HostTensor Vector(const std::vector<double>& values) {
  return HostTensor::FromVector<double>(Shape{static_cast<int64_t>(values.size())}, values);
}

HostTensor Scalar(double value) { return HostTensor::FromVector<double>(Shape{}, {value}); }

// Runs `op` once per entry of `grads` at iterations first_iteration, +1, ...
// with env["g"] set to that gradient.
void RunSteps(const OpConf& op, TensorMap* env, const std::vector<std::vector<double>>& grads,
              int64_t first_iteration = 0) {
  for (size_t step = 0; step < grads.size(); ++step) {
    (*env)["g"] = Vector(grads[step]);
    RunOpOptions options;
    options.iteration = first_iteration + static_cast<int64_t>(step);
    StatusOr<TensorMap> result = RunOp(op, env, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->empty());
  }
}

std::vector<double> Values(const TensorMap& env, const std::string& lbn) {
  return env.at(lbn).ToVector<double>();
}

OpConf Sgd(double lr, double weight_decay, bool with_scale = false) {
  OpConfBuilder builder("sgd_update", "w-sgd");
  builder.Input("model", "w").Input("model_diff", "g");
  if (with_scale) builder.Input("scale", "s");
  return builder.Attr("base_lr", lr).Attr("weight_decay", weight_decay).Build();
}

TEST(SgdUpdateTest, PlainSteps) {
  TensorMap env;
  env["w"] = Vector({1.0, -2.0});
  RunSteps(Sgd(0.1, 0.0), &env, {{0.5, 1.0}, {0.5, 1.0}});
  std::vector<double> w = Values(env, "w");
  EXPECT_DOUBLE_EQ(w[0], 0.9);
  EXPECT_DOUBLE_EQ(w[1], -2.2);
}

TEST(SgdUpdateTest, WeightDecayAddsL2Term) {
  TensorMap env;
  env["w"] = Vector({1.0});
  RunSteps(Sgd(0.1, 0.1), &env, {{0.5}, {0.5}});
  // step 1: g = 0.5 + 0.1 * 1 = 0.6 -> 0.94; step 2: g = 0.5 + 0.094 -> 0.8806
  EXPECT_DOUBLE_EQ(Values(env, "w")[0], 0.8806);
}

TEST(SgdUpdateTest, ScaleInputMultipliesGradient) {
  TensorMap env;
  env["w"] = Vector({1.0, 0.0, 3.0});
  env["s"] = Scalar(0.5);
  RunSteps(Sgd(0.1, 0.0, true), &env, {{0.5, -4.0, 0.0}});
  std::vector<double> w = Values(env, "w");
  EXPECT_DOUBLE_EQ(w[0], 0.975);
  EXPECT_DOUBLE_EQ(w[1], 0.2);
  EXPECT_EQ(w[2], 3.0);
  env["s"] = Scalar(std::nan(""));
  (*&env)["g"] = Vector({1.0, 1.0, 1.0});
  StatusOr<TensorMap> bad = RunOp(Sgd(0.1, 0.0, true), &env);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("w-sgd"), std::string::npos) << bad.status();
}

TEST(SgdUpdateTest, UsesScheduleAtTheIteration) {
  OpConf op = Sgd(1.0, 0.0);
  SetStringAttr(&op, "lr_type", "step");
  SetIntAttr(&op, "step_size", 10);
  SetFloatAttr(&op, "gamma", 0.5);
  TensorMap env;
  env["w"] = Vector({0.0});
  RunSteps(op, &env, {{1.0}}, /*first_iteration=*/9);  // lr 1
  EXPECT_EQ(Values(env, "w")[0], -1.0);
  RunSteps(op, &env, {{1.0}}, /*first_iteration=*/10);  // lr 0.5
  EXPECT_EQ(Values(env, "w")[0], -1.5);
  RunSteps(op, &env, {{1.0}}, /*first_iteration=*/20);  // lr 0.25
  EXPECT_EQ(Values(env, "w")[0], -1.75);
}

TEST(SgdUpdateTest, EmptyTensorIsANoOp) {
  TensorMap env;
  env["w"] = Vector({});
  RunSteps(Sgd(0.1, 0.0), &env, {{}});
  EXPECT_EQ(env.at("w").elem_count(), 0);
}

TEST(MomentumUpdateTest, ThreeSteps) {
  OpConf op = OpConfBuilder("momentum_update", "w-momentum")
                  .Input("model", "w")
                  .Input("model_diff", "g")
                  .Input("momentum", "m")
                  .Attr("base_lr", 0.1)
                  .Attr("beta", 0.9)
                  .Build();
  TensorMap env;
  env["w"] = Vector({1.0});
  env["m"] = Vector({0.0});
  RunSteps(op, &env, {{1.0}, {1.0}, {1.0}});
  // m: 1, 1.9, 2.71; w: 0.9, 0.71, 0.439
  EXPECT_DOUBLE_EQ(Values(env, "m")[0], 2.71);
  EXPECT_DOUBLE_EQ(Values(env, "w")[0], 0.439);
}

OpConf Adam(double weight_decay, bool decoupled) {
  return OpConfBuilder("adam_update", "w-adam")
      .Input("model", "w")
      .Input("model_diff", "g")
      .Input("m", "m")
      .Input("v", "v")
      .Attr("base_lr", 0.1)
      .Attr("beta1", 0.9)
      .Attr("beta2", 0.999)
      .Attr("epsilon", 1e-8)
      .Attr("weight_decay", weight_decay)
      .Attr("decoupled", decoupled)
      .Build();
}

TensorMap AdamEnv() {
  TensorMap env;
  env["w"] = Vector({1.0});
  env["m"] = Vector({0.0});
  env["v"] = Vector({0.0});
  return env;
}

TEST(AdamUpdateTest, TwoBiasCorrectedSteps) {
  TensorMap env = AdamEnv();
  RunSteps(Adam(0.0, false), &env, {{0.5}});
  EXPECT_DOUBLE_EQ(Values(env, "w")[0], 0.900000002);  // 1 - 0.1 * 0.5 / (0.5 + 1e-8)
  RunSteps(Adam(0.0, false), &env, {{-0.25}}, /*first_iteration=*/1);
  EXPECT_DOUBLE_EQ(Values(env, "m")[0], 0.02);
  EXPECT_NEAR(Values(env, "v")[0], 0.00031225, 1e-18);  // 1 - beta2 is inexact
  // m^ = 0.02 / 0.19, v^ = 0.00031225 / 0.001999
  EXPECT_DOUBLE_EQ(Values(env, "w")[0], 0.8733662987078463);
}

TEST(AdamUpdateTest, AdamWDecaysWeightsDirectly) {
  TensorMap decoupled = AdamEnv();
  RunSteps(Adam(0.1, true), &decoupled, {{0.5}});
  EXPECT_DOUBLE_EQ(Values(decoupled, "w")[0], 0.890000002);  // extra lr * wd * w
  // Coupled decay goes through the moments: the first step stays ~lr.
  TensorMap coupled = AdamEnv();
  RunSteps(Adam(0.1, false), &coupled, {{0.5}});
  EXPECT_NEAR(Values(coupled, "w")[0], 0.9, 1e-7);
  EXPECT_DOUBLE_EQ(Values(coupled, "m")[0], 0.06);  // 0.1 * (0.5 + 0.1)
}

TEST(AdamUpdateTest, FloatKernelMatchesDouble) {
  OpConf op = Adam(0.01, true);
  TensorMap env;
  env["w"] = HostTensor::FromVector<float>(Shape{3}, {1.0f, -1.0f, 0.5f});
  env["m"] = HostTensor(TensorDesc(Shape{3}, DT_FLOAT));
  env["v"] = HostTensor(TensorDesc(Shape{3}, DT_FLOAT));
  env["g"] = HostTensor::FromVector<float>(Shape{3}, {0.5f, 0.25f, -2.0f});
  ASSERT_TRUE(RunOp(op, &env).ok());
  std::vector<float> w = env.at("w").ToVector<float>();
  EXPECT_NEAR(w[0], 1.0 - 0.1 * (1.0 + 0.01), 1e-6);
  EXPECT_NEAR(w[1], -1.0 - 0.1 * (1.0 - 0.01), 1e-6);
  EXPECT_NEAR(w[2], 0.5 + 0.1 * (1.0 - 0.005), 1e-6);
}

OpConf ClipScale(int inputs, double max_norm) {
  std::vector<std::string> lbns;
  for (int i = 0; i < inputs; ++i) lbns.push_back("g" + std::to_string(i));
  return OpConfBuilder("clip_scale", "clip")
      .Input("in", lbns)
      .Output("out")
      .Attr("max_norm", max_norm)
      .Build();
}

double RunClip(const OpConf& op, TensorMap* env) {
  StatusOr<TensorMap> out = RunOp(op, env);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->at("clip/out_0").data<double>()[0] : -1.0;
}

TEST(ClipScaleTest, GlobalNormOverAllInputs) {
  TensorMap env;
  env["g0"] = Vector({3.0, 4.0});
  env["g1"] = Vector({12.0});
  env["g2"] = Vector({});
  EXPECT_DOUBLE_EQ(RunClip(ClipScale(3, 6.5), &env), 6.5 / (13.0 + 1e-6));  // norm 13
  EXPECT_EQ(RunClip(ClipScale(3, 100.0), &env), 1.0);
  env["g0"] = Vector({0.0, 0.0});
  env["g1"] = Vector({0.0});
  EXPECT_EQ(RunClip(ClipScale(3, 0.5), &env), 1.0);
}

TEST(ClipScaleTest, ClippedSgdStepHasNormMaxNorm) {
  TensorMap env;
  env["g0"] = Vector({30.0, 40.0});  // norm 50
  const double scale = RunClip(ClipScale(1, 5.0), &env);
  env["w"] = Vector({0.0, 0.0});
  env["s"] = Scalar(scale);
  env["g"] = env.at("g0").Clone();
  ASSERT_TRUE(RunOp(Sgd(1.0, 0.0, true), &env).ok());
  std::vector<double> w = Values(env, "w");
  EXPECT_NEAR(std::hypot(w[0], w[1]), 5.0, 1e-6);
  EXPECT_NEAR(w[0], -3.0, 1e-6);
}

TEST(ClipScaleTest, NonFiniteNormIsAnErrorNamingTheInput) {
  TensorMap env;
  env["g0"] = Vector({1.0});
  env["g1"] = Vector({std::nan("")});
  StatusOr<TensorMap> out = RunOp(ClipScale(2, 1.0), &env);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("in[1]"), std::string::npos) << out.status();
}

// Random values in [-1, 1) as a float or double tensor.
HostTensor RandomTensor(int64_t n, DataType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> values(n);
  for (double& v : values) v = dist(rng);
  if (dtype == DT_FLOAT) {
    return HostTensor::FromVector<float>(Shape{n}, std::vector<float>(values.begin(), values.end()));
  }
  return HostTensor::FromVector<double>(Shape{n}, values);
}

std::vector<double> Doubles(const HostTensor& t) {
  if (t.desc().dtype == DT_DOUBLE) return t.ToVector<double>();
  const std::vector<float> values = t.ToVector<float>();
  return std::vector<double>(values.begin(), values.end());
}

// Inputs of GPT-like sizes (blocks of 4096 elements, partial last blocks,
// an empty input) over 1, 2 and 3 threads: the same bits, and the norm of a
// long double sum.
TEST(ClipScaleTest, BlockedSumIsTheSameOnAnyThreadCountAndExact) {
  const std::vector<int64_t> sizes = {65536, 128, 0, 49152, 1, 4097, 16385, 4095};
  const int before = CpuComputeThreadsSetting();
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    TensorMap env;
    long double sum = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      env["g" + std::to_string(k)] = RandomTensor(sizes[k], dtype, 30 + k);
      for (double v : Doubles(env.at("g" + std::to_string(k)))) {
        sum += static_cast<long double>(v) * v;
      }
    }
    const double want = 1.0 / (std::sqrt(static_cast<double>(sum)) + 1e-6);
    std::vector<double> got;
    for (int threads : {1, 2, 3}) {
      SetCpuComputeThreads(threads);
      StatusOr<TensorMap> out = RunOp(ClipScale(static_cast<int>(sizes.size()), 1.0), &env);
      ASSERT_TRUE(out.ok()) << out.status();
      got.push_back(Doubles(out->at("clip/out_0"))[0]);
    }
    EXPECT_EQ(got[1], got[0]) << DataTypeName(dtype);
    EXPECT_EQ(got[2], got[0]) << DataTypeName(dtype);
    EXPECT_NEAR(got[0], want, (dtype == DT_FLOAT ? 1e-7 : 1e-14) * want) << DataTypeName(dtype);
  }
  SetCpuComputeThreads(before > 0 ? before : 1);
}

TEST(ClipScaleTest, NonFiniteValueDeepInAnInputNamesThatInput) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    TensorMap env;
    env["g0"] = RandomTensor(9000, dtype, 40);
    env["g1"] = RandomTensor(20000, dtype, 41);
    env["g2"] = RandomTensor(10, dtype, 42);
    std::vector<double> values = Doubles(env.at("g1"));
    values[12345] = std::numeric_limits<double>::infinity();
    env["g1"] = dtype == DT_FLOAT
                    ? HostTensor::FromVector<float>(
                          Shape{20000}, std::vector<float>(values.begin(), values.end()))
                    : HostTensor::FromVector<double>(Shape{20000}, values);
    StatusOr<TensorMap> out = RunOp(ClipScale(3, 1.0), &env);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("in[1]"), std::string::npos) << out.status();
  }
}

// The sharded form of clip_scale (docs/compiler.md, "Sharded optimizer
// states"): square_sum of each device's slices, the partial sums added,
// clip_scale_from_square_sum; the factor equals clip_scale's over the whole
// tensors (to the last bits of a double sum in another order), for float
// and double gradients and an empty slice.
TEST(ClipScaleTest, SquareSumsOfSlicesGiveClipScalesFactor) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    TensorMap env;
    env["g0"] = RandomTensor(10000, dtype, 50);
    env["g1"] = RandomTensor(7, dtype, 51);
    StatusOr<TensorMap> whole = RunOp(ClipScale(2, 0.5), &env);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const double want = Doubles(whole->at("clip/out_0"))[0];
    // Three devices: g0 in slices of 3334, 3333, 3333; g1 in 3, 2, 2.
    const std::vector<std::vector<int64_t>> bounds = {{0, 3334, 6667, 10000}, {0, 3, 5, 7}};
    TensorMap sums;
    std::vector<std::string> partials;
    for (int device = 0; device < 3; ++device) {
      TensorMap part;
      for (int k = 0; k < 2; ++k) {
        const std::vector<double> all = Doubles(env.at("g" + std::to_string(k)));
        std::vector<double> slice(all.begin() + bounds[k][device],
                                  all.begin() + bounds[k][device + 1]);
        const int64_t n = static_cast<int64_t>(slice.size());
        part["s" + std::to_string(k)] =
            dtype == DT_FLOAT
                ? HostTensor::FromVector<float>(Shape{n},
                                                std::vector<float>(slice.begin(), slice.end()))
                : HostTensor::FromVector<double>(Shape{n}, slice);
      }
      OpConf square = OpConfBuilder("square_sum", "sq")
                          .Input("in", std::vector<std::string>{"s0", "s1"})
                          .Output("out")
                          .Build();
      StatusOr<TensorMap> out = RunOp(square, &part);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->at("sq/out_0").desc().dtype, DT_DOUBLE);
      partials.push_back("p" + std::to_string(device));
      sums[partials.back()] = out->at("sq/out_0").Clone();
    }
    OpConf clip = OpConfBuilder("clip_scale_from_square_sum", "c")
                      .Input("square_sum", partials)
                      .Output("out")
                      .Attr("max_norm", 0.5)
                      .Attr("dtype", dtype)
                      .Build();
    StatusOr<TensorMap> out = RunOp(clip, &sums);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->at("c/out_0").desc().dtype, dtype);
    EXPECT_NEAR(Doubles(out->at("c/out_0"))[0], want, (dtype == DT_FLOAT ? 1e-7 : 1e-14) * want);
    EXPECT_LT(want, 1.0);  // it clips
  }
}

// Adam over the GPT's largest weights and an odd size on 1, 2 and 3
// threads: the same model and moments, bit for bit.
TEST(AdamUpdateTest, SameBitsOnAnyThreadCount) {
  const int before = CpuComputeThreadsSetting();
  for (int64_t n : {int64_t{65536}, int64_t{70001}}) {
    std::vector<TensorMap> results;
    for (int threads : {1, 2, 3}) {
      SetCpuComputeThreads(threads);
      TensorMap env;
      env["w"] = RandomTensor(n, DT_FLOAT, 50);
      env["m"] = HostTensor(TensorDesc(Shape{n}, DT_FLOAT));
      env["v"] = HostTensor(TensorDesc(Shape{n}, DT_FLOAT));
      for (int64_t step = 0; step < 2; ++step) {
        env["g"] = RandomTensor(n, DT_FLOAT, 60 + step);
        RunOpOptions options;
        options.iteration = step;
        ASSERT_TRUE(RunOp(Adam(0.01, true), &env, options).ok());
      }
      results.push_back(std::move(env));
    }
    for (size_t run = 1; run < results.size(); ++run) {
      for (const char* lbn : {"w", "m", "v"}) {
        EXPECT_EQ(results[run].at(lbn).ToVector<float>(), results[0].at(lbn).ToVector<float>())
            << lbn << " n=" << n << " run " << run;
      }
    }
  }
  SetCpuComputeThreads(before > 0 ? before : 1);
}

}  // namespace
}  // namespace oflite
