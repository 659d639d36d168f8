// The runtime on plans from the compiler, against the reference executor:
// the MLP of testing/test_jobs on 1 device, 2 devices data parallel, model
// parallel (split columns and split rows) and a 2-stage pipeline, 20
// iterations each.
#include <cmath>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/reference/reference_executor.h"
#include "oneflow_lite/runtime/runtime.h"

namespace oflite {
namespace {

using compiler::MlpSpec;
using compiler::ModelParallel;

class Recorder : public MetricsObserver {
 public:
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, value] : metrics) values[name][iteration] = value;
  }
  std::vector<double> Curve(const std::string& name) {
    std::vector<double> curve;
    for (const auto& [iteration, value] : values[name]) curve.push_back(value);
    return curve;
  }
  std::mutex mutex_;
  std::map<std::string, std::map<int64_t, double>> values;
};

constexpr int64_t kIterations = 20;

struct Case {
  const char* name;
  MlpSpec spec;
  bool bitwise;  // same reduction order as the reference
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  MlpSpec base;
  base.iterations = kIterations;
  base.accuracy_metric = true;
  cases.push_back({"one_device", base, true});
  MlpSpec data_parallel = base;
  data_parallel.placement = "0:cpu:0-1";
  cases.push_back({"data_parallel", data_parallel, false});
  MlpSpec columns = data_parallel;
  columns.model_parallel = ModelParallel::kSplitColumns;
  cases.push_back({"model_parallel_columns", columns, false});
  MlpSpec rows = data_parallel;
  rows.model_parallel = ModelParallel::kSplitRows;
  cases.push_back({"model_parallel_rows", rows, false});
  MlpSpec megatron = data_parallel;
  megatron.model_parallel = ModelParallel::kMegatron;
  cases.push_back({"megatron", megatron, false});
  MlpSpec pipeline = base;
  pipeline.stages = {"0:cpu:0", "0:cpu:1"};
  cases.push_back({"pipeline", pipeline, true});
  return cases;
}

StatusOr<std::vector<double>> RunCompiled(const Job& job, Recorder* recorder) {
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, compiler::MakeCluster(1, 2)));
  RuntimeOptions options;
  options.metrics = recorder;
  options.watchdog_timeout = std::chrono::milliseconds(20000);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  return recorder->Curve("loss");
}

class CompiledPlanTest : public ::testing::TestWithParam<Case> {};

TEST_P(CompiledPlanTest, LossCurveMatchesTheReferenceExecutor) {
  const Case& c = GetParam();
  StatusOr<Job> job = compiler::BuildMlpJob(c.spec);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<ReferenceTrainResult> reference = TrainReference(*job, kIterations);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(reference->losses.size(), static_cast<size_t>(kIterations));

  Recorder recorder;
  StatusOr<std::vector<double>> losses = RunCompiled(*job, &recorder);
  ASSERT_TRUE(losses.ok()) << losses.status();
  ASSERT_EQ(losses->size(), static_cast<size_t>(kIterations));
  for (int64_t i = 0; i < kIterations; ++i) {
    const double want = reference->losses[i];
    const double got = (*losses)[i];
    if (c.bitwise) {
      EXPECT_EQ(got, want) << c.name << " iteration " << i;
    } else {
      EXPECT_LE(std::abs(got - want), 1e-5 * std::abs(want)) << c.name << " iteration " << i;
    }
  }
  // The loss went down: the updates reached the variables.
  EXPECT_LT(losses->back(), losses->front());
  ASSERT_EQ(recorder.Curve("accuracy").size(), static_cast<size_t>(kIterations));
  for (int64_t i = 0; i < kIterations; ++i) {
    EXPECT_NEAR(recorder.Curve("accuracy")[i], reference->iterations[i].values.at("accuracy"),
                1e-12);
  }
}

TEST_P(CompiledPlanTest, SamePlanAndSeedGiveTheSameCurveTwice) {
  const Case& c = GetParam();
  StatusOr<Job> job = compiler::BuildMlpJob(c.spec);
  ASSERT_TRUE(job.ok()) << job.status();
  Recorder first, second;
  StatusOr<std::vector<double>> a = RunCompiled(*job, &first);
  StatusOr<std::vector<double>> b = RunCompiled(*job, &second);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a, *b);
}

INSTANTIATE_TEST_SUITE_P(Layouts, CompiledPlanTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace oflite
