// Layers that return their parameters, the default initializers, and named
// outputs (Graph::AddOutput) through the evaluation job.
#include <gtest/gtest.h>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/eval_job.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/attr.h"

namespace oflite {
namespace {

std::string InitializerOf(const Job& job, const std::string& variable) {
  const OpConf* op = FindOp(job, variable);
  return op == nullptr ? "(missing)" : AttrView(*op).GetStringOr("initializer", "");
}

TEST(LayerTest, DenseLayerReturnsItsParameters) {
  Graph g("layers");
  Tensor x = RandomBatch(&g, Shape{8, 5}, 3).image;
  Layer dense = DenseLayer(&g, x, 4);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(dense.output.desc.ToString(), "float32(8, 4)");
  EXPECT_EQ(dense.weight.lbn, "dense-weight/out_0");
  EXPECT_EQ(dense.weight.desc.ToString(), "float32(5, 4)");
  EXPECT_EQ(dense.bias.lbn, "dense-bias/out_0");
  // The returned weight takes a hint: column-parallel without re-creating it.
  g.HintSbp(dense.weight, Split(1));
  Layer no_bias = DenseLayer(&g, dense.output, 2, {.use_bias = false});
  EXPECT_TRUE(no_bias.output.valid());
  EXPECT_FALSE(no_bias.bias.valid());
  // The plain form is the same layer.
  Tensor plain = Dense(&g, no_bias.output, 3);
  EXPECT_EQ(plain.desc.ToString(), "float32(8, 3)");
  StatusOr<Job> job = g.BuildForward();
  ASSERT_TRUE(job.ok()) << job.status();
  const OpConf* weight = FindOp(*job, "dense-weight");
  ASSERT_NE(weight, nullptr);
  ASSERT_EQ(weight->output_sbp_hint_size(), 1);
  EXPECT_EQ(SbpToString(weight->output_sbp_hint(0).sbp(0)), "S(1)");
  EXPECT_EQ(InitializerOf(*job, "dense-weight"), "xavier_uniform");
  EXPECT_EQ(InitializerOf(*job, "dense-bias"), "constant");
}

TEST(LayerTest, ConvLayerNormAndEmbeddingReturnTheirParameters) {
  Graph g("layers");
  Tensor x = RandomBatch(&g, Shape{2, 3, 9, 9}, 3).image;
  Layer conv = Conv2dLayer(&g, x, 4, 3);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(conv.weight.desc.ToString(), "float32(4, 3, 3, 3)");
  EXPECT_EQ(conv.bias.desc.ToString(), "float32(4,)");
  EXPECT_EQ(conv.output.desc.ToString(), "float32(2, 4, 7, 7)");
  Layer norm = LayerNormLayer(&g, conv.output);
  EXPECT_EQ(norm.weight.desc.ToString(), "float32(7,)");  // gamma
  EXPECT_EQ(norm.bias.desc.ToString(), "float32(7,)");    // beta
  Tensor ids = g.Cast(RandomBatch(&g, Shape{2, 1}, 10, Split(0), DT_FLOAT, "ids").label, DT_INT32);
  Layer embedding = EmbeddingLayer(&g, ids, 10, 6);
  EXPECT_EQ(embedding.weight.desc.ToString(), "float32(10, 6)");
  EXPECT_EQ(embedding.output.desc.ToString(), "float32(2, 6)");
  EXPECT_TRUE(g.ok()) << g.status();
}

TEST(LayerTest, LayersAfterAnErrorReturnNothing) {
  Graph g("broken");
  Tensor x = RandomBatch(&g, Shape{8, 5}, 3).image;
  Layer bad = DenseLayer(&g, x, 0);
  EXPECT_FALSE(bad.output.valid());
  EXPECT_FALSE(bad.weight.valid());
  EXPECT_FALSE(g.ok());
  Layer after = DenseLayer(&g, x, 3);
  EXPECT_FALSE(after.output.valid());
}

TEST(LayerTest, VariableDefaultsToGlorotForMatricesAndZerosOtherwise) {
  Graph g("defaults");
  g.Variable("matrix", Shape{6, 4});
  g.Variable("kernel", Shape{8, 3, 3, 3});
  g.Variable("vector", Shape{4});
  g.Variable("zeros", Shape{6, 4}, {.initializer = Initializer::Zeros()});
  g.Variable("normal", Shape{4}, {.initializer = Initializer::Normal(0, 1)});
  StatusOr<Job> job = g.BuildForward();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(InitializerOf(*job, "matrix"), "xavier_uniform");
  EXPECT_EQ(InitializerOf(*job, "kernel"), "xavier_uniform");
  EXPECT_EQ(InitializerOf(*job, "vector"), "constant");
  EXPECT_EQ(InitializerOf(*job, "zeros"), "constant");
  EXPECT_EQ(InitializerOf(*job, "normal"), "normal");
  EXPECT_EQ(ResolveInitializer(Initializer::Auto(), Shape{}).kind, "constant");
}

TEST(LayerTest, OutputsReachTheEvaluationJobRewiredThroughDropout) {
  Graph g("outputs");
  auto data = RandomBatch(&g, Shape{8, 5}, 3);
  Tensor logits = Dropout(&g, Dense(&g, data.image, 3), 0.5, "drop");
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  g.AddOutput("logits", logits);
  g.AddOutput("label", data.label);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{.learning_rate = 0.1});
  g.SetIterations(2);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->conf().train().output_size(), 2);
  EXPECT_EQ(job->conf().train().output(0).name(), "logits");
  EXPECT_EQ(job->conf().train().output(0).lbn(0), "drop/y_0");
  StatusOr<Job> eval = MakeEvalJob(*job);
  // No test split in a random source: MakeEvalJob still derives the job.
  ASSERT_TRUE(eval.ok()) << eval.status();
  ASSERT_EQ(eval->conf().train().output_size(), 2);
  EXPECT_EQ(eval->conf().train().output(0).lbn(0), "drop/out_0");
}

TEST(LayerTest, OutputNamesAreCheckedLikeMetrics) {
  Graph g("names");
  auto data = RandomBatch(&g, Shape{8, 5}, 3);
  g.AddMetric("accuracy", g.Accuracy(Dense(&g, data.image, 3), data.label));
  g.AddOutput("accuracy", data.image);
  EXPECT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'accuracy' is already a metric"), std::string::npos)
      << g.status();
  Graph h("names");
  auto batch = RandomBatch(&h, Shape{8, 5}, 3);
  h.AddOutput("two words", batch.image);
  EXPECT_NE(h.status().message().find("without whitespace"), std::string::npos) << h.status();
}

}  // namespace
}  // namespace oflite
