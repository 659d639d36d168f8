// Data parallelism with a batch the devices do not divide: Fashion-MNIST
// batch 64 over 3 CPU devices (parts 22, 21, 21) with the source's
// uneven_split trains exactly like one device (loss and accuracy of every
// iteration within 1e-5 relative); without it the compile refuses, saying
// how to ask for it.
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/runtime/runtime.h"

namespace oflite {
namespace {

class Recorder : public MetricsObserver {
 public:
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, value] : metrics) values_[name][iteration] = value;
  }
  std::map<int64_t, double> Curve(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_[name];
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::map<int64_t, double>> values_;
};

StatusOr<Job> MlpJob(const std::string& placement, bool uneven_split, int64_t batch) {
  Graph g("uneven", /*seed=*/3);
  FashionMnistOptions data_options;
  data_options.flatten = true;
  data_options.uneven_split = uneven_split;
  auto data = FashionMnist(&g, "/usr/share/datasets/fashion-mnist", batch, Split(0), data_options);
  auto logits = Dense(&g, g.Relu(Dense(&g, data.image, 32)), 10);
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{.learning_rate = 0.1});
  g.SetIterations(20);
  g.SetPlacement(Placement::Parse(placement));
  return g.Build();
}

StatusOr<Recorder*> Train(const Job& job, int64_t devices, Recorder* recorder) {
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, compiler::MakeCluster(1, devices)));
  RuntimeOptions options;
  options.metrics = recorder;
  options.watchdog_timeout = std::chrono::milliseconds(60000);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  return recorder;
}

void ExpectSameCurves(Recorder* want, Recorder* got, int64_t iterations) {
  for (const char* name : {"loss", "accuracy"}) {
    std::map<int64_t, double> a = want->Curve(name), b = got->Curve(name);
    ASSERT_EQ(a.size(), static_cast<size_t>(iterations)) << name;
    ASSERT_EQ(b.size(), a.size()) << name;
    for (const auto& [iteration, value] : a) {
      EXPECT_NEAR(b[iteration], value, 1e-5 * std::max(1.0, std::fabs(value)))
          << name << " at iteration " << iteration;
    }
  }
}

TEST(UnevenSplitTest, ThreeDevicesWithBatch64EqualOneDevice) {
  StatusOr<Job> one = MlpJob("0:cpu:0", /*uneven_split=*/true, 64);
  StatusOr<Job> three = MlpJob("0:cpu:0-2", /*uneven_split=*/true, 64);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(three.ok()) << three.status();
  Recorder want, got;
  ASSERT_TRUE(Train(*one, 1, &want).ok());
  StatusOr<Recorder*> trained = Train(*three, 3, &got);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ExpectSameCurves(&want, &got, 20);
  // The loss moved: the comparison is not of two constant curves.
  EXPECT_LT(want.Curve("loss").rbegin()->second, want.Curve("loss").begin()->second);
}

TEST(UnevenSplitTest, OddBatchOverTwoDevicesAndTheEvaluationPlanCompile) {
  StatusOr<Job> one = MlpJob("0:cpu:0", true, 33);
  StatusOr<Job> two = MlpJob("0:cpu:0-1", true, 33);
  ASSERT_TRUE(one.ok() && two.ok());
  Recorder want, got;
  ASSERT_TRUE(Train(*one, 1, &want).ok());
  StatusOr<Recorder*> trained = Train(*two, 2, &got);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ExpectSameCurves(&want, &got, 20);
  StatusOr<Plan> plan = CompileNodePlan(*two, compiler::MakeCluster(1, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->eval_state(), EVAL_COMPILED) << plan->eval_note();
}

TEST(UnevenSplitTest, WithoutTheOptionTheCompileSaysHowToAskForIt) {
  StatusOr<Job> job = MlpJob("0:cpu:0-2", /*uneven_split=*/false, 64);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(1, 3));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("batch 64 is not divisible by 3 devices"),
            std::string::npos)
      << plan.status();
  EXPECT_NE(plan.status().message().find("uneven_split option"), std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace oflite
