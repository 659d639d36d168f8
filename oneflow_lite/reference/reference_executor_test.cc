#include "oneflow_lite/reference/reference_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"

namespace oflite {
namespace {

using ::testing::HasSubstr;

// loss = mean(w * w) over w = [1, -2]: d loss / d w = w, so plain SGD with
// lr 0.1 scales w by 0.9 each iteration, and the loss of iteration t (read
// before that iteration's update) is 2.5 * 0.81^t.
Job QuadraticJob(DataType dtype, const Optimizer& optimizer) {
  Graph g("quadratic");
  Tensor w = g.Variable("w", Shape{2}, {.initializer = Initializer::Uniform(1, 1), .dtype = dtype});
  (void)w;
  g.Minimize(g.ReduceMean(g.Mul(w, w)), optimizer);
  g.SetIterations(3);
  StatusOr<Job> job = g.Build();
  CHECK_OK(job.status());
  return *job;
}

TEST(ReferenceExecutorTest, SgdOnAQuadraticMatchesHandComputation) {
  Job job = QuadraticJob(DT_DOUBLE, Sgd{.learning_rate = 0.1});
  StatusOr<std::unique_ptr<ReferenceExecutor>> executor = ReferenceExecutor::Create(job);
  ASSERT_TRUE(executor.ok()) << executor.status();
  HostTensor start = HostTensor::FromVector<double>(Shape{2}, {1.0, -2.0});
  ASSERT_TRUE((*executor)->SetVariable("w", start).ok());
  StatusOr<std::vector<IterationMetrics>> runs = (*executor)->Run(3, {"w/out_0"});
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 3u);
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ((*runs)[t].iteration, t);
    EXPECT_NEAR((*runs)[t].values.at("loss"), 2.5 * std::pow(0.81, t), 1e-12) << t;
    // Fetched at the end of the iteration: after the update.
    EXPECT_NEAR((*runs)[t].fetched.at("w/out_0").data<double>()[0], std::pow(0.9, t + 1), 1e-12);
  }
  EXPECT_EQ((*executor)->Run(1, {"no/such_0"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*executor)->iteration(), 3);
  StatusOr<const HostTensor*> w = (*executor)->Fetch("w/out_0");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NEAR((*w)->data<double>()[0], std::pow(0.9, 3), 1e-12);
  EXPECT_NEAR((*w)->data<double>()[1], -2 * std::pow(0.9, 3), 1e-12);
  EXPECT_EQ((*executor)->iteration(), 3);
  // The counter continues.
  runs = (*executor)->Run(1);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ((*runs)[0].iteration, 3);
  EXPECT_NEAR((*runs)[0].values.at("loss"), 2.5 * std::pow(0.81, 3), 1e-12);
}

TEST(ReferenceExecutorTest, MomentumKeepsItsStateAcrossIterations) {
  Job job = QuadraticJob(DT_DOUBLE, Momentum{.learning_rate = 0.1, .momentum = 0.5});
  StatusOr<std::unique_ptr<ReferenceExecutor>> executor = ReferenceExecutor::Create(job);
  ASSERT_TRUE(executor.ok()) << executor.status();
  ASSERT_TRUE((*executor)->Run(2).ok());
  VariableMap variables = (*executor)->Variables();
  ASSERT_EQ(variables.count("w"), 1u);
  ASSERT_EQ(variables.count("w-momentum"), 1u);
  // w0 = 1 (uniform [1, 1)); g = w. Either momentum convention gives
  // w1 = 0.9 and a nonzero momentum buffer; w2 depends on the buffer.
  const double w2 = variables.at("w").data<double>()[0];
  EXPECT_LT(w2, 0.9 * 0.9);  // faster than plain SGD: the state carried over
  EXPECT_NE(variables.at("w-momentum").data<double>()[0], 0.0);
}

TEST(ReferenceExecutorTest, RunsAreDeterministic) {
  Graph g("mlp");
  Batch data = RandomBatch(&g, Shape{16, 12}, 3);
  Tensor logits = Dense(&g, g.Relu(Dense(&g, data.image, 8)), 3);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Adam{.learning_rate = 0.01},
             {.clip_global_norm = 1.0});
  g.SetIterations(5);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<ReferenceTrainResult> first = TrainReference(*job);
  StatusOr<ReferenceTrainResult> second = TrainReference(*job);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(first->losses.size(), 5u);
  EXPECT_EQ(first->losses, second->losses);
  for (double loss : first->losses) EXPECT_TRUE(std::isfinite(loss));
  EXPECT_LT(first->losses.back(), first->losses.front());
  ASSERT_EQ(first->variables.size(), second->variables.size());
  for (const auto& [name, value] : first->variables) {
    EXPECT_EQ(value.ToVector<float>(), second->variables.at(name).ToVector<float>()) << name;
  }
}

TEST(ReferenceExecutorTest, SetVariableChecksNameAndShape) {
  Job job = QuadraticJob(DT_FLOAT, Sgd{});
  StatusOr<std::unique_ptr<ReferenceExecutor>> executor = ReferenceExecutor::Create(job);
  ASSERT_TRUE(executor.ok()) << executor.status();
  Status wrong_shape = (*executor)->SetVariable("w", HostTensor(TensorDesc(Shape{3}, DT_FLOAT)));
  EXPECT_THAT(wrong_shape.message(), HasSubstr("float32(2,)"));
  EXPECT_THAT(wrong_shape.message(), HasSubstr("float32(3,)"));
  EXPECT_EQ((*executor)->SetVariable("nope", HostTensor(TensorDesc(Shape{2}, DT_FLOAT))).code(),
            StatusCode::kNotFound);
  EXPECT_EQ((*executor)->Fetch("nope/out_0").status().code(), StatusCode::kNotFound);
}

TEST(ReferenceExecutorTest, KernelErrorsStopTheRunAndNameTheOp) {
  Graph g("bad_data");
  Batch data = FashionMnist(&g, "/nonexistent", 8, Split(0), {.check_path = false});
  g.AddMetric("accuracy", g.Accuracy(Dense(&g, data.image, 10), data.label));
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<std::unique_ptr<ReferenceExecutor>> executor = ReferenceExecutor::Create(*job);
  ASSERT_FALSE(executor.ok());
  EXPECT_THAT(executor.status().message(), HasSubstr("fashion_mnist"));
  EXPECT_THAT(executor.status().message(), HasSubstr("/nonexistent"));
}

TEST(ReferenceExecutorTest, EvaluationUsesGivenVariablesAndTurnsDropoutOff) {
  Graph g("eval");
  Batch data = RandomBatch(&g, Shape{10, 6}, 3);
  Tensor x = Dropout(&g, data.image, 0.9);
  Tensor logits = Dense(&g, x, 3, {.use_bias = false});
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{});
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  VariableMap variables;
  variables.emplace("dense-weight", HostTensor(TensorDesc(Shape{6, 3}, DT_FLOAT)));
  // All-zero weights: logits are zero, the loss is exactly log(3).
  StatusOr<std::map<std::string, double>> metrics =
      EvaluateReference(*job, variables, {}, /*iterations=*/2);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NEAR(metrics->at("loss"), std::log(3.0), 1e-6);
  EXPECT_EQ(metrics->count("accuracy"), 1u);

  StatusOr<std::map<std::string, double>> missing = EvaluateReference(*job, {}, {}, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("'dense-weight'"));
}

}  // namespace
}  // namespace oflite
