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
#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/transformer.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

Job TinyGpt() {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/searched_tokens.npy";
  std::vector<uint16_t> ids(4096);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>((i * 7 + i / 13) % 13);
  EXPECT_TRUE(WriteNpyUint16(path, {static_cast<int64_t>(ids.size())}, ids.data()).ok());
  Graph g("gpt", /*seed=*/5);
  TokenWindowData data = TokenWindows(&g, path, /*batch=*/8, /*block=*/16, /*vocab=*/13);
  GptConfig config;
  config.vocab_size = 13;
  config.block_size = 16;
  config.layers = 2;
  config.heads = 4;
  config.channels = 64;
  GptModel gpt = Gpt(&g, data.input, config);
  g.Minimize(g.SparseSoftmaxCrossEntropy(gpt.logits, data.target), Sgd{0.05, 0.0});
  g.SetIterations(5);
  StatusOr<Job> job = g.Build();
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
