#include "oneflow_lite/api/eval_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/attr.h"

namespace oflite {
namespace {

using ::testing::HasSubstr;

StatusOr<Job> TrainJob() {
  Graph g("net");
  Batch data = FashionMnist(&g, "/usr/share/datasets/fashion-mnist", 64);
  Tensor h = Dropout(&g, g.Relu(Dense(&g, data.image, 32)), 0.5);
  Tensor logits = Dense(&g, h, 10);
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Momentum{});
  return g.Build();
}

TEST(EvalJobTest, KeepsTheForwardPartOnTheTestSplit) {
  StatusOr<Job> train = TrainJob();
  ASSERT_TRUE(train.ok()) << train.status();
  StatusOr<Job> eval = MakeEvalJob(*train, {.split = "test", .batch_size = 100});
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->conf().name(), "net-eval");
  EXPECT_FALSE(eval->conf().is_train());
  EXPECT_TRUE(eval->conf().train().loss_lbn().empty());
  EXPECT_EQ(eval->conf().total_iters(), 100);
  EXPECT_EQ(eval->conf().batch_size(), 100);
  ASSERT_EQ(eval->conf().train().metric_size(), 2);
  for (const OpConf& op : eval->op()) {
    EXPECT_FALSE(op.is_backward() || op.is_optimizer()) << op.name();
    EXPECT_EQ(op.control_input_size(), 0) << op.name();
    EXPECT_NE(op.op_type(), "dropout");
  }
  const OpConf* data = FindOp(*eval, "fashion_mnist");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(AttrView(*data).GetStringOr("split", ""), "test");
  EXPECT_FALSE(AttrView(*data).GetBoolOr("shuffle", true));
  EXPECT_EQ(AttrView(*data).GetIntOr("batch_size", 0), 100);
  // Dropout became an identity of the same name; its consumer follows.
  const OpConf* dropout = FindOp(*eval, "dropout");
  ASSERT_NE(dropout, nullptr);
  EXPECT_EQ(dropout->op_type(), "identity");
  EXPECT_EQ(FindOp(*eval, "dense_1-matmul")->input(0).lbn(0), "dropout/out_0");
  // Shapes were re-inferred for the new batch.
  EXPECT_EQ(BlobDescsOf(*eval).at("dense_1-bias_add/out_0").ToString(), "float32(100, 10)");
  // Optimizer state is gone, model variables stay.
  EXPECT_EQ(FindOp(*eval, "dense-weight-momentum"), nullptr);
  EXPECT_NE(FindOp(*eval, "dense-weight"), nullptr);
}

TEST(EvalJobTest, RejectsBadOptions) {
  StatusOr<Job> train = TrainJob();
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_THAT(MakeEvalJob(*train, {.split = "validation"}).status().message(),
              HasSubstr("\"validation\""));
  EXPECT_FALSE(MakeEvalJob(*train, {.batch_size = -1}).ok());
  StatusOr<Job> huge = MakeEvalJob(*train, {.batch_size = 20000});
  EXPECT_TRUE(huge.ok()) << huge.status();
  EXPECT_EQ(huge->conf().total_iters(), 0);
}

}  // namespace
}  // namespace oflite
