#include "oneflow_lite/api/micro_batches.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/reference/reference_executor.h"

namespace oflite {
namespace {

// A 2-layer MLP on a random batch; micro_batches -1: SetMicroBatches is not
// called.
StatusOr<Job> Mlp(int64_t batch, int64_t micro_batches, const std::string& placement = "0:cpu:0",
                  bool output = false) {
  Graph g("mlp", /*seed=*/3);
  g.SetPlacement(Placement::Parse(placement));
  Batch data = RandomBatch(&g, Shape{batch, 12}, 5);
  Tensor logits = Dense(&g, g.Relu(Dense(&g, data.image, 16)), 5);
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  if (output) g.AddOutput("logits", logits);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{0.5});
  g.SetIterations(8);
  if (micro_batches != -1) g.SetMicroBatches(micro_batches, PIPELINE_GPIPE);
  return g.Build();
}

TEST(MicroBatchesTest, ClonesTheBatchOpsAndTagsTheirBackward) {
  StatusOr<Job> job = Mlp(8, 4);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->conf().pipeline().micro_batches(), 4);
  EXPECT_EQ(job->conf().pipeline().schedule(), PIPELINE_GPIPE);
  std::map<int64_t, int> forward, backward;
  int slices = 0, sources = 0, variables = 0;
  for (const OpConf& op : job->op()) {
    if (op.op_type() == "random_batch") ++sources;
    if (op.op_type() == "variable" && !op.is_optimizer()) {
      ++variables;
      EXPECT_FALSE(op.has_micro_batch()) << op.name();
    }
    if (op.op_type() == "slice" && !op.is_backward()) ++slices;
    if (op.is_optimizer()) {
      EXPECT_FALSE(op.has_micro_batch()) << op.name();
    }
    if (!op.has_micro_batch()) continue;
    (op.is_backward() ? backward : forward)[op.micro_batch()]++;
  }
  EXPECT_EQ(sources, 1);
  EXPECT_EQ(variables, 4);   // shared: two weights, two biases
  EXPECT_EQ(slices, 2 * 4);  // image and label, per micro-batch
  ASSERT_EQ(forward.size(), 4u);
  ASSERT_EQ(backward.size(), 4u);
  // Micro-batches 1..3 add their 4 weight gradients to the accumulation.
  for (int64_t k = 1; k < 4; ++k) {
    EXPECT_EQ(forward[k], forward[0]);
    EXPECT_EQ(backward[k], backward[0] + 4);
  }
  // Micro-batch 2 reads rows 2, 6 (start 2, step 4).
  const OpConf* slice = FindOp(*job, "random_batch-image_0-mb2");
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->micro_batch(), 2);
  // Each weight's gradient accumulates micro-batch by micro-batch: three
  // 2-input adds, tagged 1, 2 and 3 (run in those backward units), before
  // one update.
  std::map<int64_t, int> accumulations;
  for (const OpConf& op : job->op()) {
    if (op.op_type() == "add" && op.name().find("-grad_acc") != std::string::npos) {
      EXPECT_EQ(op.input(0).lbn_size(), 2) << op.name();
      ASSERT_TRUE(op.has_micro_batch()) << op.name();
      accumulations[op.micro_batch()]++;
    }
  }
  EXPECT_EQ(accumulations, (std::map<int64_t, int>{{1, 4}, {2, 4}, {3, 4}}));
  // The loss and accuracy are means of 4 parts.
  EXPECT_NE(job->conf().train().loss_lbn().find("-micro_mean"), std::string::npos);
}

TEST(MicroBatchesTest, OneMicroBatchLeavesTheJobUnchanged) {
  StatusOr<Job> one = Mlp(8, 1);
  StatusOr<Job> plain = Mlp(8, -1);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(one->conf().has_pipeline());
  EXPECT_EQ(one->SerializeAsString(), plain->SerializeAsString());
}

// Gradient accumulation over micro-batches trains like the whole batch:
// the reference executor's losses and accuracies agree to 1e-5 relative,
// and so does an output put back in batch order.
TEST(MicroBatchesTest, TrainsLikeTheWholeBatch) {
  StatusOr<Job> plain = Mlp(8, -1, "0:cpu:0", /*output=*/true);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (int64_t m : {2, 4, 8}) {
    StatusOr<Job> micro = Mlp(8, m, "0:cpu:0", /*output=*/true);
    ASSERT_TRUE(micro.ok()) << micro.status();
    auto a = ReferenceExecutor::Create(*plain);
    auto b = ReferenceExecutor::Create(*micro);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    const std::string plain_out = plain->conf().train().output(0).lbn(0);
    const std::string micro_out = micro->conf().train().output(0).lbn(0);
    auto ra = (*a)->Run(1, {plain_out});
    auto rb = (*b)->Run(1, {micro_out});
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    const HostTensor& la = ra->at(0).fetched.at(plain_out);
    const HostTensor& lb = rb->at(0).fetched.at(micro_out);
    ASSERT_EQ(la.shape(), lb.shape());
    for (int64_t i = 0; i < la.shape().elem_count(); ++i) {
      EXPECT_NEAR(la.data<float>()[i], lb.data<float>()[i], 1e-6) << "m=" << m << " i=" << i;
    }
    auto rest_a = (*a)->Run(7);
    auto rest_b = (*b)->Run(7);
    ASSERT_TRUE(rest_a.ok()) << rest_a.status();
    ASSERT_TRUE(rest_b.ok()) << rest_b.status();
    for (size_t it = 0; it < rest_a->size(); ++it) {
      for (const char* metric : {"loss", "accuracy"}) {
        const double x = rest_a->at(it).values.at(metric);
        const double y = rest_b->at(it).values.at(metric);
        EXPECT_LE(std::fabs(x - y), 1e-5 * std::max(1.0, std::fabs(x)))
            << metric << " m=" << m << " iteration " << it + 1;
      }
    }
  }
}

TEST(MicroBatchesTest, ErrorsNameTheCountsAndSuggestDivisors) {
  StatusOr<Job> job = Mlp(8, 3);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find("micro-batches 3"), std::string::npos) << job.status();
  EXPECT_NE(job.status().message().find("batch 8"), std::string::npos) << job.status();
  EXPECT_NE(job.status().message().find("use 2 or 4"), std::string::npos) << job.status();

  // Split over 2 devices: 4 rows each, which 8 micro-batches cannot share.
  job = Mlp(8, 8, "0:cpu:0-1");
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("per-device batch 4"), std::string::npos)
      << job.status();
  EXPECT_NE(job.status().message().find("use 4"), std::string::npos) << job.status();

  job = Mlp(8, 0);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("micro-batches 0 must be at least 1"), std::string::npos)
      << job.status();

  Graph g("inference", 1);
  Batch data = RandomBatch(&g, Shape{8, 4}, 2);
  g.AddMetric("mean", g.ReduceMean(Dense(&g, data.image, 2)));
  g.SetMicroBatches(2);
  job = g.Build();
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("need a training graph"), std::string::npos);
}

TEST(MicroBatchesTest, NearestDivisors) {
  EXPECT_EQ(NearestDivisors(64, 3), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(NearestDivisors(4, 8), (std::vector<int64_t>{4}));
  EXPECT_EQ(NearestDivisors(6, 5), (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(NearestDivisors(7, 3), (std::vector<int64_t>{7}));
}

}  // namespace
}  // namespace oflite
