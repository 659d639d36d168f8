// Layouts the auto-parallel search makes (api/auto_parallel.h) train like
// data parallelism: the MLP and a tiny GPT, each laid out by the search's
// candidates over two CPU devices (data parallel, Megatron pairs with and
// without their activations hinted) and run by the runtime; the losses
// agree within float rounding of the reductions' order.
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/api/auto_parallel.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

Job TinyGpt() {
  const char* dir = std::getenv("TEST_TMPDIR");
  StatusOr<Job> job = compiler::BuildTinyGptJob(
      std::string(dir != nullptr ? dir : "/tmp") + "/searched_tokens.npy", "0:cpu:0",
      /*tensor_parallel=*/1, /*learning_rate=*/0.05, /*iterations=*/5);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : Job();
}

Job Mlp() {
  compiler::MlpSpec spec;
  spec.batch = 16;
  spec.features = 24;
  spec.hidden = {64, 64};
  spec.classes = 4;
  spec.iterations = 5;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : Job();
}

std::map<int64_t, double> Train(const Job& job, const ClusterProto& cluster) {
  StatusOr<Plan> plan = compiler::Compile(job, cluster);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  testing::MetricsRecorder recorder;
  RuntimeOptions options;
  options.metrics = &recorder;
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(*plan, options);
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (!runtime.ok()) return {};
  Status status = (*runtime)->Run();
  EXPECT_TRUE(status.ok()) << status;
  return recorder.Values("loss");
}

TEST(SearchedLayoutsTest, TensorParallelCandidatesTrainLikeDataParallelism) {
  // One machine with two CPU devices: the search lays out over both.
  const ClusterProto cluster = compiler::MakeCluster(1, 2);
  AutoParallelOptions options;
  options.min_split_elements = 1024;
  for (const auto& [name, trained] : {std::make_pair(std::string("mlp"), Mlp()),
                                      std::make_pair(std::string("gpt"), TinyGpt())}) {
    StatusOr<Job> forward = ForwardJobOf(trained);
    ASSERT_TRUE(forward.ok()) << forward.status();
    std::map<std::string, std::map<int64_t, double>> losses;
    for (const LayoutSpec& layout : CandidateLayouts(*forward, cluster, options)) {
      if (layout.name != "dp" && layout.name != "tp" && layout.name != "tp-act") continue;
      StatusOr<Job> job = ApplyLayout(*forward, layout, cluster, /*ignore_hints=*/false);
      ASSERT_TRUE(job.ok()) << name << " " << layout.name << ": " << job.status();
      losses[layout.name] = Train(*job, cluster);
    }
    ASSERT_EQ(losses.size(), 3u) << name;
    const std::map<int64_t, double>& dp = losses.at("dp");
    ASSERT_EQ(dp.size(), 5u) << name;
    EXPECT_NE(dp.begin()->second, dp.rbegin()->second) << name << ": the loss moves";
    for (const std::string layout : {"tp", "tp-act"}) {
      ASSERT_EQ(losses.at(layout).size(), dp.size()) << name << " " << layout;
      for (const auto& [iteration, loss] : dp) {
        EXPECT_NEAR(losses.at(layout).at(iteration), loss, 1e-4 * std::abs(loss))
            << name << " " << layout << ", iteration " << iteration;
      }
    }
  }
}

}  // namespace
}  // namespace oflite
