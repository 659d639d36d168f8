#include "oneflow_lite/api/optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/reference/reference_executor.h"

namespace oflite {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// loss = mean(w * w) over w = [1, -2] (float64): the gradient is w itself.
StatusOr<Job> QuadraticJob(const Optimizer& optimizer, const MinimizeOptions& options = {},
                           int64_t iterations = 4) {
  Graph g("quadratic");
  Tensor w = g.Variable("w", Shape{2}, {.dtype = DT_DOUBLE});
  g.Minimize(g.ReduceMean(g.Mul(w, w)), optimizer, options);
  g.SetIterations(iterations);
  return g.Build();
}

// Runs `iterations` iterations from w = [1, -2] and returns w.
std::vector<double> Train(const Job& job, int64_t iterations) {
  auto executor = ReferenceExecutor::Create(job);
  CHECK_OK(executor.status());
  CHECK_OK((*executor)->SetVariable("w", HostTensor::FromVector<double>(Shape{2}, {1, -2})));
  CHECK_OK((*executor)->Run(iterations).status());
  return (*executor)->Variables().at("w").ToVector<double>();
}

TEST(OptimizerTest, SgdWithWeightDecay) {
  StatusOr<Job> job = QuadraticJob(Sgd{.learning_rate = 0.1, .weight_decay = 0.5});
  ASSERT_TRUE(job.ok()) << job.status();
  // g = w + 0.5 w: w <- w (1 - 0.15).
  std::vector<double> w = Train(*job, 2);
  EXPECT_NEAR(w[0], 0.85 * 0.85, 1e-12);
  EXPECT_NEAR(w[1], -2 * 0.85 * 0.85, 1e-12);
}

TEST(OptimizerTest, MomentumAddsAZeroStateVariable) {
  StatusOr<Job> job = QuadraticJob(Momentum{.learning_rate = 0.1, .momentum = 0.5});
  ASSERT_TRUE(job.ok()) << job.status();
  const OpConf* state = FindOp(*job, "w-momentum");
  ASSERT_NE(state, nullptr);
  EXPECT_TRUE(state->is_optimizer());
  EXPECT_FALSE(IsTrainableVariable(*state));
  EXPECT_EQ(AttrView(*state).GetStringOr("initializer", ""), "constant");
  EXPECT_EQ(AttrView(*state).GetFloatOr("value", -1), 0.0);
  const OpConf* update = FindOp(*job, "w-update");
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(update->op_type(), "momentum_update");
  EXPECT_THAT(update->mutable_input(), ElementsAre("model", "momentum"));
  EXPECT_EQ(AttrView(*update).GetFloatOr("beta", 0), 0.5);
  // momentum = 0.5 momentum + w; w -= 0.1 momentum.
  // t0: m = 1, w = 0.9.  t1: m = 0.5 + 0.9 = 1.4, w = 0.9 - 0.14 = 0.76.
  std::vector<double> w = Train(*job, 2);
  EXPECT_NEAR(w[0], 0.76, 1e-12);
  EXPECT_NEAR(w[1], -1.52, 1e-12);
}

TEST(OptimizerTest, AdamFirstStepMovesByTheLearningRate) {
  StatusOr<Job> job = QuadraticJob(Adam{.learning_rate = 0.1, .epsilon = 1e-12});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_NE(FindOp(*job, "w-m"), nullptr);
  ASSERT_NE(FindOp(*job, "w-v"), nullptr);
  const OpConf* update = FindOp(*job, "w-update");
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(update->op_type(), "adam_update");
  EXPECT_THAT(update->mutable_input(), ElementsAre("model", "m", "v"));
  EXPECT_FALSE(AttrView(*update).GetBoolOr("decoupled", true));
  // Bias-corrected first step: m^ = g, v^ = g^2, step = lr * sign(g).
  std::vector<double> w = Train(*job, 1);
  EXPECT_NEAR(w[0], 0.9, 1e-9);
  EXPECT_NEAR(w[1], -1.9, 1e-9);
}

TEST(OptimizerTest, AdamWDecaysDecoupled) {
  StatusOr<Job> job =
      QuadraticJob(AdamW{.learning_rate = 0.1, .epsilon = 1e-12, .weight_decay = 0.5});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(AttrView(*FindOp(*job, "w-update")).GetBoolOr("decoupled", false));
  // w -= lr * (sign(g) + 0.5 w).
  std::vector<double> w = Train(*job, 1);
  EXPECT_NEAR(w[0], 1 - 0.1 * (1 + 0.5), 1e-9);
  EXPECT_NEAR(w[1], -2 - 0.1 * (-1 - 1), 1e-9);
}

TEST(OptimizerTest, WeightDecayMinRankSparesVectors) {
  Graph g("decay_by_rank");
  Tensor w = g.Variable("w", Shape{2, 2}, {.dtype = DT_DOUBLE});
  Tensor b = g.Variable("b", Shape{2}, {.dtype = DT_DOUBLE});
  g.Minimize(g.Add(g.ReduceMean(g.Mul(w, w)), g.ReduceMean(g.Mul(b, b))),
             AdamW{.learning_rate = 0.1, .weight_decay = 0.5}, {.weight_decay_min_rank = 2});
  g.SetIterations(1);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(AttrView(*FindOp(*job, "w-update")).GetFloatOr("weight_decay", -1), 0.5);
  EXPECT_EQ(AttrView(*FindOp(*job, "b-update")).GetFloatOr("weight_decay", -1), 0.0);
}

TEST(OptimizerTest, ClipByGlobalNormScalesEveryUpdate) {
  StatusOr<Job> job = QuadraticJob(Sgd{.learning_rate = 0.1}, {.clip_global_norm = 1.0});
  ASSERT_TRUE(job.ok()) << job.status();
  const OpConf* clip = FindOp(*job, "optimizer-clip_scale");
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->op_type(), "clip_scale");
  EXPECT_EQ(AttrView(*clip).GetFloatOr("max_norm", 0), 1.0);
  const OpConf* update = FindOp(*job, "w-update");
  bool has_scale = false;
  for (const ArgProto& arg : update->input()) {
    if (arg.name() == "scale") has_scale = arg.lbn(0) == "optimizer-clip_scale/out_0";
  }
  EXPECT_TRUE(has_scale);
  // |g| = sqrt(5): w <- w - 0.1 * w / (sqrt(5) + 1e-6).
  const double factor = 1 - 0.1 / (std::sqrt(5.0) + 1e-6);
  std::vector<double> w = Train(*job, 1);
  EXPECT_NEAR(w[0], factor, 1e-9);
  EXPECT_NEAR(w[1], -2 * factor, 1e-9);
}

TEST(OptimizerTest, StepScheduleChangesTheRateOnTime) {
  StatusOr<Job> job =
      QuadraticJob(Sgd{.learning_rate = 0.1}, {.schedule = LrScheduleOptions::Step(2, 0.5)});
  ASSERT_TRUE(job.ok()) << job.status();
  const OpConf* update = FindOp(*job, "w-update");
  EXPECT_EQ(AttrView(*update).GetStringOr("lr_type", ""), "step");
  EXPECT_EQ(AttrView(*update).GetIntOr("step_size", 0), 2);
  EXPECT_EQ(AttrView(*update).GetIntOr("total_iters", 0), 4);
  // lr 0.1, 0.1, 0.05, 0.05.
  std::vector<double> w = Train(*job, 4);
  EXPECT_NEAR(w[0], 0.9 * 0.9 * 0.95 * 0.95, 1e-12);
}

TEST(OptimizerTest, CosineScheduleCarriesWarmupAndTotal) {
  StatusOr<Job> job =
      QuadraticJob(Sgd{.learning_rate = 0.1}, {.schedule = LrScheduleOptions::Cosine(2, 0.01)}, 10);
  ASSERT_TRUE(job.ok()) << job.status();
  AttrView attrs(*FindOp(*job, "w-update"));
  EXPECT_EQ(attrs.GetStringOr("lr_type", ""), "cosine");
  EXPECT_EQ(attrs.GetIntOr("warmup_iters", 0), 2);
  EXPECT_EQ(attrs.GetIntOr("total_iters", 0), 10);
  EXPECT_EQ(attrs.GetFloatOr("min_lr", 0), 0.01);
  // Warm-up: lr(0) = 0.1 * 1 / 2.
  std::vector<double> w = Train(*job, 1);
  EXPECT_NEAR(w[0], 1 - 0.05, 1e-12);

  StatusOr<Job> no_total =
      QuadraticJob(Sgd{.learning_rate = 0.1}, {.schedule = LrScheduleOptions::Cosine(2)}, 0);
  ASSERT_FALSE(no_total.ok());
  EXPECT_THAT(no_total.status().message(), HasSubstr("cosine schedule needs total iterations"));
}

TEST(OptimizerTest, InvalidSettingsAreNamed) {
  StatusOr<Job> job = QuadraticJob(Sgd{.learning_rate = 0});
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("learning_rate must be > 0"));
  job = QuadraticJob(Momentum{.learning_rate = 0.1, .momentum = 1.0});
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("momentum must be in [0, 1)"));
  job = QuadraticJob(Adam{.beta2 = 1.5});
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("beta2"));
}

TEST(OptimizerTest, UntrainableAndUnusedVariablesGetNoUpdate) {
  Graph g("partial");
  Tensor w = g.Variable("w", Shape{2});
  Tensor frozen = g.Variable("frozen", Shape{2}, {.trainable = false});
  g.Variable("unused", Shape{2});
  g.Minimize(g.ReduceSum(g.Mul(w, frozen)), Adam{});
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_NE(FindOp(*job, "w-update"), nullptr);
  EXPECT_EQ(FindOp(*job, "frozen-update"), nullptr);
  EXPECT_EQ(FindOp(*job, "unused-update"), nullptr);
  EXPECT_EQ(FindOp(*job, "frozen-m"), nullptr);
}

TEST(OptimizerTest, StateVariablesFollowTheModelPlacementAndSbp) {
  Graph g("sharded");
  Tensor w;
  {
    auto scope = g.WithPlacement(Placement::Parse("0:cpu:0-1"));
    w = g.Variable("w", Shape{4, 2});
    g.HintSbp(w, Split(0));
  }
  g.Minimize(g.ReduceSum(g.Mul(w, w)), Adam{});
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  for (const char* name : {"w-m", "w-v", "w-update"}) {
    const OpConf* op = FindOp(*job, name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(PlacementToString(op->placement()), "0:cpu:0-1") << name;
  }
  ASSERT_EQ(FindOp(*job, "w-m")->output_sbp_hint_size(), 1);
  EXPECT_EQ(SbpToString(FindOp(*job, "w-m")->output_sbp_hint(0).sbp(0)), "S(0)");
}

}  // namespace
}  // namespace oflite
