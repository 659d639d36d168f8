// A plan compiled with the fusion pass (compiler/fusion.h) trains exactly
// like the unfused plan: the same loss at every iteration, bit for bit, on
// one device and data parallel over two (float32 MLPs with two hidden
// ReLU or GELU layers, SGD).
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

std::map<int64_t, double> TrainLosses(const Job& job, bool fuse, bool matmul_bias = false) {
  compiler::CompileOptions options;
  options.fuse = fuse;
  options.fuse_matmul_bias = matmul_bias;
  StatusOr<Plan> plan = compiler::Compile(job, compiler::MakeCluster(1, 4), options);
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
  for (const std::string activation : {"relu", "gelu"}) {
  for (const std::string placement : {"0:cpu:0", "0:cpu:0-1"}) {
    compiler::MlpSpec spec;
    spec.activation = activation;
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
    EXPECT_EQ(fused, plain) << placement << " " << activation;
    EXPECT_NE(plain.begin()->second, plain.rbegin()->second) << "the model did not train";
  }
  }
}

// matmul_bias adds the bias in oneDNN's GEMM epilogue, whose sums may be
// blocked differently from sgemm's: the losses agree to float32 rounding
// (and the plan trains), on one device, data parallel and model parallel
// (the fused op split along n with its bias, or along k to a partial sum).
TEST(FusedPlanTest, MatmulBiasTrainsLikeTheUnfusedPlan) {
  struct Case {
    std::string placement;
    compiler::ModelParallel model_parallel;
  };
  for (const Case& c : {Case{"0:cpu:0", compiler::ModelParallel::kNone},
                        Case{"0:cpu:0-1", compiler::ModelParallel::kNone},
                        Case{"0:cpu:0-1", compiler::ModelParallel::kSplitColumns},
                        Case{"0:cpu:0-1", compiler::ModelParallel::kSplitRows},
                        Case{"0:cpu:0-3@2x2", compiler::ModelParallel::kDataTensor2d}}) {
    compiler::MlpSpec spec;
    spec.batch = 12;
    spec.features = 19;
    spec.hidden = {33, 17};
    spec.classes = 5;
    spec.placement = c.placement;
    spec.model_parallel = c.model_parallel;
    spec.iterations = 6;
    StatusOr<Job> job = compiler::BuildMlpJob(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    const std::map<int64_t, double> plain = TrainLosses(*job, false);
    const std::map<int64_t, double> fused = TrainLosses(*job, true, true);
    ASSERT_EQ(plain.size(), 6u) << c.placement;
    ASSERT_EQ(fused.size(), 6u) << c.placement;
    for (const auto& [iter, loss] : plain) {
      EXPECT_NEAR(fused.at(iter), loss, 1e-5 * std::abs(loss))
          << c.placement << " model parallel " << static_cast<int>(c.model_parallel)
          << " iteration " << iter;
    }
    EXPECT_NE(plain.begin()->second, plain.rbegin()->second) << "the model did not train";
  }
}

}  // namespace
}  // namespace oflite
