// Done-when of issue 3: the 784-256-256-10 MLP trained for one epoch on
// Fashion-MNIST (batch 64, SGD lr 0.1) with the reference executor reaches
// at least 82% accuracy on the test split.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/reference/reference_executor.h"

namespace oflite {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

double Mean(const std::vector<double>& values, size_t begin, size_t end) {
  return std::accumulate(values.begin() + begin, values.begin() + end, 0.0) / (end - begin);
}

TEST(MlpFashionMnistTest, OneEpochOfSgdReaches82PercentTestAccuracy) {
  Graph g("mlp", /*seed=*/1);
  // Standardized pixels (the training split's mean and std).
  Batch data = FashionMnist(&g, kFashionMnist, 64, Split(0), {.mean = 0.2860, .std = 0.3530});
  Tensor h = g.Relu(Dense(&g, data.image, 256));
  Tensor logits = Dense(&g, g.Relu(Dense(&g, h, 256)), 10);
  Tensor loss = g.SparseSoftmaxCrossEntropy(logits, data.label);
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  g.Minimize(loss, Sgd{.learning_rate = 0.1});
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->conf().total_iters(), 937);

  const auto start = std::chrono::steady_clock::now();
  StatusOr<ReferenceTrainResult> trained = TrainReference(*job);
  ASSERT_TRUE(trained.ok()) << trained.status();
  const double train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<double>& losses = trained->losses;
  ASSERT_EQ(losses.size(), 937u);
  for (double value : losses) ASSERT_TRUE(std::isfinite(value));
  const double first = Mean(losses, 0, 50), last = Mean(losses, losses.size() - 50, losses.size());
  EXPECT_GT(losses[0], 1.5);  // starts near log(10) = 2.3
  EXPECT_LT(last, 0.6);
  EXPECT_LT(last, first / 2);

  StatusOr<std::map<std::string, double>> test =
      EvaluateReference(*job, trained->variables, {.split = "test", .batch_size = 100});
  ASSERT_TRUE(test.ok()) << test.status();
  std::cout << "one epoch: " << train_seconds << " s; loss " << first << " -> " << last
            << "; test loss " << test->at("loss") << ", test accuracy " << test->at("accuracy")
            << std::endl;
  EXPECT_GE(test->at("accuracy"), 0.82);
  EXPECT_LT(test->at("loss"), 0.6);
}

}  // namespace
}  // namespace oflite
