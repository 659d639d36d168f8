// A plan compiled with the fusion pass (compiler/fusion.h) trains exactly
// like the unfused plan: the same loss at every iteration, bit for bit, on
// one device and data parallel over two (float32 MLPs with two hidden
// ReLU layers, SGD and momentum).
#include <map>
#include <memory>

#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

std::map<int64_t, double> TrainLosses(const Job& job, bool fuse) {
  compiler::CompileOptions options;
  options.fuse = fuse;
  StatusOr<Plan> plan = compiler::Compile(job, compiler::MakeCluster(1, 2), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  testing::MetricsRecorder recorder;
  RuntimeOptions runtime_options;
  runtime_options.metrics = &recorder;
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(*plan, runtime_options);
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (!runtime.ok()) return {};
  Status run = (*runtime)->Run();
  EXPECT_TRUE(run.ok()) << run;
  return recorder.Values("loss");
}

TEST(FusedPlanTest, TrainsBitIdenticallyToTheUnfusedPlan) {
  for (const std::string placement : {"0:cpu:0", "0:cpu:0-1"}) {
    compiler::MlpSpec spec;
    spec.batch = 12;
    spec.features = 19;
    spec.hidden = {33, 17};
    spec.classes = 5;
    spec.placement = placement;
    spec.iterations = 6;
    StatusOr<Job> job = compiler::BuildMlpJob(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    const std::map<int64_t, double> plain = TrainLosses(*job, false);
    const std::map<int64_t, double> fused = TrainLosses(*job, true);
    ASSERT_EQ(plain.size(), 6u) << placement;
    EXPECT_EQ(fused, plain) << placement;
    EXPECT_NE(plain.begin()->second, plain.rbegin()->second) << "the model did not train";
  }
}

}  // namespace
}  // namespace oflite
