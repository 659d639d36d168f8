#include "oneflow_lite/compiler/clip_norm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "oneflow_lite/ops/sbp.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace compiler {
namespace {

Job MlpJob(const std::string& placement, ModelParallel model_parallel, double clip) {
  MlpSpec spec;
  spec.batch = 8;
  spec.features = 6;
  spec.hidden = {4};
  spec.placement = placement;
  spec.model_parallel = model_parallel;
  spec.clip_global_norm = clip;
  StatusOr<Job> job = BuildMlpJob(spec);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : Job();
}

const OpConf* FindOp(const Job& job, const std::string& name) {
  for (const OpConf& op : job.op()) {
    if (op.name() == name) return &op;
  }
  return nullptr;
}

std::string ClipName(const Job& job) {
  for (const OpConf& op : job.op()) {
    if (op.op_type() == "clip_scale") return op.name();
  }
  return "";
}

// dp x tp: the clip becomes one square_sum per (placement, parameter hint)
// with a split, partial on the split axis, and clip_scale_from_square_sum
// under the clip's name and output.
TEST(ClipNormTest, SplitParametersGetPartialSquareSums) {
  const Job job = MlpJob("0-1:cpu:0-1@2x2", ModelParallel::kDataTensor2d, 1.0);
  const std::string clip = ClipName(job);
  ASSERT_FALSE(clip.empty());
  const OpConf before = *FindOp(job, clip);
  StatusOr<ClipNormResult> result = SplitClipNorms(job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->clips, 1);
  EXPECT_GE(result->groups, 2);  // (B, S(1)) and (B, S(0)) parameters
  const OpConf* scale = FindOp(result->job, clip);
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->op_type(), "clip_scale_from_square_sum");
  EXPECT_EQ(scale->output(0).lbn(0), before.output(0).lbn(0));
  int partial = 0, whole = 0, inputs = 0;
  for (const OpConf& op : result->job.op()) {
    if (op.op_type() != "square_sum") continue;
    ASSERT_EQ(op.output_sbp_hint_size(), 1);
    ASSERT_EQ(op.input(0).lbn_size(), op.input_sbp_hint_size()) << op.name();
    inputs += op.input(0).lbn_size();
    const NdSbp& out = op.output_sbp_hint(0);
    const NdSbp& in = op.input_sbp_hint(0);
    const bool split = std::any_of(in.sbp().begin(), in.sbp().end(),
                                   [](const SbpParallel& s) { return IsSplit(s); });
    ASSERT_EQ(out.sbp_size(), in.sbp_size()) << op.name();
    for (int k = 0; k < in.sbp_size(); ++k) {
      EXPECT_EQ(out.sbp(k).has_partial_sum(), IsSplit(in.sbp(k))) << op.name() << " axis " << k;
    }
    (split ? partial : whole) += 1;
    // Its scalar has a blob desc: float64, no dims.
    const auto desc = std::find_if(result->job.blob().begin(), result->job.blob().end(),
                                   [&](const LogicalBlobDesc& b) { return b.lbn() == op.output(0).lbn(0); });
    ASSERT_NE(desc, result->job.blob().end()) << op.name();
    EXPECT_EQ(desc->desc().dtype(), DT_DOUBLE);
    EXPECT_EQ(desc->desc().shape().dim_size(), 0);
  }
  EXPECT_EQ(partial, result->groups);
  EXPECT_LE(whole, 1);
  EXPECT_EQ(inputs, before.input(0).lbn_size());  // every gradient summed once
  EXPECT_TRUE(std::is_sorted(result->job.blob().begin(), result->job.blob().end(),
                             [](const LogicalBlobDesc& a, const LogicalBlobDesc& b) {
                               return a.lbn() < b.lbn();
                             }));
  // Same input, same output.
  StatusOr<ClipNormResult> again = SplitClipNorms(job);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->job.SerializeAsString(), result->job.SerializeAsString());
}

// A pipeline: the gradients of a stage other than the clip's are summed on
// that stage (B in and out) and only the scalar reaches the clip; those on
// the clip's own stage are summed where it runs.
TEST(ClipNormTest, PipelineStagesSumTheirOwnGradients) {
  MlpSpec spec;
  spec.batch = 8;
  spec.features = 6;
  spec.hidden = {5, 4};
  spec.stages = {"0:cpu:0", "0:cpu:1", "0:cpu:1"};
  spec.clip_global_norm = 1.0;
  spec.micro_batches = 2;
  StatusOr<Job> job = BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string clip = ClipName(*job);
  ASSERT_FALSE(clip.empty());
  const OpConf before = *FindOp(*job, clip);
  StatusOr<ClipNormResult> result = SplitClipNorms(*job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->clips, 1);
  EXPECT_EQ(result->groups, 1);  // the stage the clip is not on
  const OpConf* scale = FindOp(result->job, clip);
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->op_type(), "clip_scale_from_square_sum");
  EXPECT_EQ(scale->input(0).lbn_size(), 2);
  // Placement of each op of the job that produces a gradient's variable.
  std::map<std::string, std::string> placement_of_grad;
  for (const OpConf& op : job->op()) {
    std::string grad, model;
    for (const ArgProto& a : op.input()) {
      if (a.name() == "model_diff" && a.lbn_size() == 1) grad = a.lbn(0);
      if (a.name() == "model" && a.lbn_size() == 1) model = a.lbn(0);
    }
    if (grad.empty() || model.empty()) continue;
    const OpConf* variable = FindOp(*job, model.substr(0, model.find('/')));
    ASSERT_NE(variable, nullptr) << model;
    ASSERT_TRUE(variable->has_placement()) << variable->name();
    placement_of_grad[grad] = variable->placement().SerializeAsString();
  }
  int inputs = 0;
  std::set<std::string> sum_placements;
  for (const OpConf& op : result->job.op()) {
    if (op.op_type() != "square_sum") continue;
    ASSERT_TRUE(op.has_placement()) << op.name();
    sum_placements.insert(op.placement().SerializeAsString());
    ASSERT_EQ(op.input(0).lbn_size(), op.input_sbp_hint_size()) << op.name();
    for (int i = 0; i < op.input(0).lbn_size(); ++i) {
      ++inputs;
      // Every gradient is summed on its own parameter's placement, whole.
      EXPECT_EQ(placement_of_grad.at(op.input(0).lbn(i)), op.placement().SerializeAsString())
          << op.input(0).lbn(i);
      EXPECT_TRUE(op.input_sbp_hint(i).sbp(0).has_broadcast()) << op.name();
    }
    EXPECT_TRUE(op.output_sbp_hint(0).sbp(0).has_broadcast()) << op.name();
  }
  EXPECT_EQ(sum_placements.size(), 2u);  // cpu:0 and cpu:1
  EXPECT_EQ(inputs, before.input(0).lbn_size());
  // Same input, same output.
  StatusOr<ClipNormResult> again = SplitClipNorms(*job);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->job.SerializeAsString(), result->job.SerializeAsString());
}

TEST(ClipNormTest, NothingSplitLeavesTheJob) {
  for (const Job& job : {MlpJob("0:cpu:0-1", ModelParallel::kNone, 1.0),
                         MlpJob("0-1:cpu:0-1@2x2", ModelParallel::kDataTensor2d, 0.0)}) {
    StatusOr<ClipNormResult> result = SplitClipNorms(job);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->clips, 0);
    EXPECT_EQ(result->job.SerializeAsString(), job.SerializeAsString());
  }
}

TEST(ClipNormTest, AGradientWithoutADescIsAnError) {
  Job job = MlpJob("0:cpu:0-1", ModelParallel::kSplitColumns, 1.0);
  const OpConf* clip = FindOp(job, ClipName(job));
  ASSERT_NE(clip, nullptr);
  const std::string first = clip->input(0).lbn(0);
  auto* blobs = job.mutable_blob();
  blobs->erase(std::remove_if(blobs->begin(), blobs->end(),
                              [&](const LogicalBlobDesc& b) { return b.lbn() == first; }),
               blobs->end());
  StatusOr<ClipNormResult> result = SplitClipNorms(job);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find(clip->name()), std::string::npos) << result.status();
  EXPECT_NE(result.status().message().find(first), std::string::npos) << result.status();
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
