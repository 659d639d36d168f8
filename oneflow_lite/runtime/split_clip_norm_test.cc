// The split clip norm (compiler/clip_norm.h) trains like the clip that reads
// every gradient whole: under tensor parallelism (flat column or row split
// over 2 devices, data x tensor parallel on a 2x2 hierarchy) the losses of
// plans compiled with and without the pass agree to float rounding (the
// norm's squares are summed in float64 in another order), and they follow
// the one-device run; the split plan converts fewer bytes (a scalar per
// group instead of gradients gathered or all-reduced whole). The clip is
// tight (max_norm 0.05), so its factor is below 1 at every step.
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/compiler/plan_summary.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

struct Trained {
  std::map<int64_t, double> losses;
  int64_t boxed_bytes = 0;  // the logical bytes of every boxing task
  int split_clips = 0;      // clip_scale_from_square_sum kernels
};

Trained Train(const Job& job, bool split) {
  compiler::CompileOptions options;
  options.split_clip_norms = split;
  StatusOr<Plan> plan = compiler::Compile(job, compiler::MakeCluster(1, 4), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  Trained run;
  for (const MachinePlan& m : plan->machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.has_boxing()) run.boxed_bytes += TensorDesc(t.boxing().logical_desc()).ByteSize();
      for (const KernelConf& k : t.kernel()) {
        if (k.op().op_type() == "clip_scale_from_square_sum") ++run.split_clips;
      }
    }
  }
  testing::MetricsRecorder recorder;
  RuntimeOptions runtime_options;
  runtime_options.metrics = &recorder;
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(*plan, runtime_options);
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (!runtime.ok()) return {};
  Status status = (*runtime)->Run();
  EXPECT_TRUE(status.ok()) << status;
  run.losses = recorder.Values("loss");
  return run;
}

compiler::MlpSpec Spec(const std::string& placement, compiler::ModelParallel model_parallel) {
  compiler::MlpSpec spec;
  spec.batch = 12;
  spec.features = 19;
  spec.hidden = {32, 16};
  spec.classes = 4;
  spec.placement = placement;
  spec.model_parallel = model_parallel;
  spec.iterations = 6;
  spec.clip_global_norm = 0.05;
  return spec;
}

void ExpectNear(const std::map<int64_t, double>& got, const std::map<int64_t, double>& want,
                double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [iteration, loss] : want) {
    EXPECT_NEAR(got.at(iteration), loss, tolerance * std::abs(loss))
        << what << ", iteration " << iteration;
  }
}

TEST(SplitClipNormTest, TensorParallelTrainsLikeTheWholeClip) {
  StatusOr<Job> one = compiler::BuildMlpJob(Spec("0:cpu:0", compiler::ModelParallel::kNone));
  ASSERT_TRUE(one.ok()) << one.status();
  const Trained reference = Train(*one, true);
  ASSERT_EQ(reference.losses.size(), 6u);
  EXPECT_EQ(reference.split_clips, 0);  // one device: nothing split, clip_scale kept
  EXPECT_NE(reference.losses.begin()->second, reference.losses.rbegin()->second);

  struct Case {
    std::string placement;
    compiler::ModelParallel model_parallel;
  };
  for (const Case& c : {Case{"0:cpu:0-1", compiler::ModelParallel::kSplitColumns},
                        Case{"0:cpu:0-1", compiler::ModelParallel::kSplitRows},
                        Case{"0:cpu:0-3@2x2", compiler::ModelParallel::kDataTensor2d}}) {
    const std::string what =
        c.placement + " model parallel " + std::to_string(static_cast<int>(c.model_parallel));
    StatusOr<Job> job = compiler::BuildMlpJob(Spec(c.placement, c.model_parallel));
    ASSERT_TRUE(job.ok()) << job.status();
    const Trained whole = Train(*job, false);
    const Trained split = Train(*job, true);
    EXPECT_EQ(whole.split_clips, 0) << what;
    EXPECT_GT(split.split_clips, 0) << what;
    EXPECT_LT(split.boxed_bytes, whole.boxed_bytes) << what;
    ExpectNear(split.losses, whole.losses, 1e-6, what + ", split against whole");
    ExpectNear(split.losses, reference.losses, 1e-4, what + ", split against one device");
  }
}

// A 2-stage pipeline (micro-batches, 1F1B): the first stage sums its own
// gradients and sends one scalar to the clip on the second. It trains like
// the whole clip and the one-device run; across two machines it pulls
// fewer bytes (before: every first-stage gradient crossed to the clip).
TEST(SplitClipNormTest, PipelineStagesSendAScalarNotTheirGradients) {
  compiler::MlpSpec spec = Spec("0:cpu:0", compiler::ModelParallel::kNone);
  StatusOr<Job> one = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(one.ok()) << one.status();
  const Trained reference = Train(*one, true);
  ASSERT_EQ(reference.losses.size(), 6u);

  spec.micro_batches = 2;
  spec.stages = {"0:cpu:0", "0:cpu:1", "0:cpu:1"};
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const Trained whole = Train(*job, false);
  const Trained split = Train(*job, true);
  EXPECT_EQ(whole.split_clips, 0);
  EXPECT_GT(split.split_clips, 0);
  ExpectNear(split.losses, whole.losses, 1e-6, "pipeline, split against whole");
  ExpectNear(split.losses, reference.losses, 1e-4, "pipeline, split against one device");

  // The same pipeline over two machines: the bytes pulled across.
  spec.stages = {"0:cpu:0", "1:cpu:0", "1:cpu:0"};
  StatusOr<Job> two = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(two.ok()) << two.status();
  auto pulled = [&](bool split_clip) -> int64_t {
    compiler::CompileOptions options;
    options.split_clip_norms = split_clip;
    StatusOr<Plan> plan = compiler::Compile(*two, compiler::MakeCluster(2, 1), options);
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return -1;
    int64_t bytes = 0;
    for (const compiler::CrossMachineEdge& e : compiler::Summarize(*plan).cross_machine_edges) {
      bytes += e.bytes;
    }
    return bytes;
  };
  // The first stage's parameters: a 19x32 weight and 32 biases, float32.
  const int64_t first_stage_grads = (19 * 32 + 32) * 4;
  const int64_t before = pulled(false), after = pulled(true);
  EXPECT_GT(before, 0);
  EXPECT_LE(after + first_stage_grads - 64, before) << "before " << before << ", after " << after;
}

// Data parallelism alone splits no parameter: the plan is the same with or
// without the pass.
TEST(SplitClipNormTest, DataParallelPlanIsUnchanged) {
  StatusOr<Job> job = compiler::BuildMlpJob(Spec("0:cpu:0-1", compiler::ModelParallel::kNone));
  ASSERT_TRUE(job.ok()) << job.status();
  compiler::CompileOptions with, without;
  without.split_clip_norms = false;
  StatusOr<Plan> a = compiler::Compile(*job, compiler::MakeCluster(1, 4), with);
  StatusOr<Plan> b = compiler::Compile(*job, compiler::MakeCluster(1, 4), without);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
}

}  // namespace
}  // namespace oflite
