#include "oneflow_lite/ops/train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/ops/op_builder.h"

namespace oflite {
namespace {

OpConf UpdateOp(const std::string& lr_type, double base_lr) {
  return OpConfBuilder("sgd_update", "w-update")
      .Attr("lr_type", lr_type)
      .Attr("base_lr", base_lr)
      .Build();
}

LrScheduleConfig Parse(const OpConf& op) {
  StatusOr<LrScheduleConfig> config = LrScheduleFromAttrs(op);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : LrScheduleConfig{};
}

TEST(LrScheduleTest, ConstantIsBaseLrAtEveryIteration) {
  LrScheduleConfig config = Parse(UpdateOp("constant", 0.1));
  EXPECT_EQ(LearningRateAt(config, 0), 0.1);
  EXPECT_EQ(LearningRateAt(config, 1), 0.1);
  EXPECT_EQ(LearningRateAt(config, 123457), 0.1);
}

TEST(LrScheduleTest, DefaultTypeIsConstant) {
  OpConf op = OpConfBuilder("sgd_update", "u").Attr("base_lr", 0.5).Build();
  EXPECT_EQ(LearningRateAt(Parse(op), 7), 0.5);
}

TEST(LrScheduleTest, LinearWarmupRampsToBaseLr) {
  OpConf op = UpdateOp("constant", 0.1);
  SetIntAttr(&op, "warmup_iters", 4);
  LrScheduleConfig config = Parse(op);
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 0), 0.025);
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 1), 0.05);
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 2), 0.075);
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 3), 0.1);
  EXPECT_EQ(LearningRateAt(config, 4), 0.1);
}

TEST(LrScheduleTest, StepDecaysByGammaEveryStepSize) {
  OpConf op = UpdateOp("step", 1.0);
  SetIntAttr(&op, "step_size", 10);
  SetFloatAttr(&op, "gamma", 0.5);
  LrScheduleConfig config = Parse(op);
  EXPECT_EQ(LearningRateAt(config, 0), 1.0);
  EXPECT_EQ(LearningRateAt(config, 9), 1.0);
  EXPECT_EQ(LearningRateAt(config, 10), 0.5);
  EXPECT_EQ(LearningRateAt(config, 19), 0.5);
  EXPECT_EQ(LearningRateAt(config, 25), 0.25);
  EXPECT_EQ(LearningRateAt(config, 30), 0.125);
}

TEST(LrScheduleTest, CosineWithWarmupHitsKnownPoints) {
  OpConf op = UpdateOp("cosine", 1.0);
  SetIntAttr(&op, "warmup_iters", 10);
  SetIntAttr(&op, "total_iters", 110);
  SetFloatAttr(&op, "min_lr", 0.1);
  LrScheduleConfig config = Parse(op);
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 0), 0.1);   // warm-up 1/10
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 4), 0.5);   // warm-up 5/10
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 10), 1.0);  // peak
  // progress 1/4: 0.1 + 0.9 * (1 + cos(pi/4)) / 2
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 35), 0.1 + 0.9 * 0.5 * (1.0 + std::sqrt(0.5)));
  EXPECT_NEAR(LearningRateAt(config, 60), 0.55, 1e-15);  // halfway
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 110), 0.1);    // end
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 500), 0.1);    // stays at min_lr
}

TEST(LrScheduleTest, CosineWithoutWarmupStartsAtBase) {
  OpConf op = UpdateOp("cosine", 2.0);
  SetIntAttr(&op, "total_iters", 4);
  LrScheduleConfig config = Parse(op);
  EXPECT_EQ(LearningRateAt(config, 0), 2.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 1), 1.0 + std::sqrt(0.5));
  EXPECT_NEAR(LearningRateAt(config, 2), 1.0, 1e-15);
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 4), 0.0);
}

void ExpectError(const OpConf& op, const std::string& fragment) {
  StatusOr<LrScheduleConfig> config = LrScheduleFromAttrs(op);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find(fragment), std::string::npos) << config.status();
  EXPECT_NE(config.status().message().find(op.name()), std::string::npos) << config.status();
}

TEST(LrScheduleTest, RejectsBadConfigsNamingTheOp) {
  ExpectError(UpdateOp("linear", 0.1), "unknown lr_type 'linear'");
  ExpectError(UpdateOp("step", 0.1), "step_size");
  ExpectError(UpdateOp("cosine", 0.1), "total_iters");
  ExpectError(UpdateOp("constant", -1.0), "base_lr");
  ExpectError(OpConfBuilder("sgd_update", "no-lr").Build(), "base_lr");
  OpConf negative_warmup = UpdateOp("constant", 0.1);
  SetIntAttr(&negative_warmup, "warmup_iters", -2);
  ExpectError(negative_warmup, "warmup_iters");
}

TEST(LrScheduleTest, ProtoRoundTripsThroughAttrs) {
  LrSchedule proto;
  proto.set_type(LR_STEP);
  proto.set_base_lr(0.3);
  proto.set_step_size(5);
  proto.set_gamma(0.2);
  OpConf op = OpConfBuilder("sgd_update", "u").Build();
  SetLrScheduleAttrs(LrScheduleFromProto(proto), &op);
  LrScheduleConfig config = Parse(op);
  EXPECT_EQ(config.type, LrType::kStep);
  EXPECT_EQ(LearningRateAt(config, 4), 0.3);
  EXPECT_DOUBLE_EQ(LearningRateAt(config, 5), 0.06);
}

}  // namespace
}  // namespace oflite
