#include "oneflow_lite/compiler/fusion.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace compiler {
namespace {

std::map<std::string, int> CountOpTypes(const Job& job) {
  std::map<std::string, int> counts;
  for (const OpConf& op : job.op()) ++counts[op.op_type()];
  return counts;
}

std::map<std::string, int> CountKernelTypes(const Plan& plan) {
  std::map<std::string, int> counts;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      for (const KernelConf& kernel : task.kernel()) ++counts[kernel.op().op_type()];
    }
  }
  return counts;
}

Job Mlp(MlpSpec spec) {
  StatusOr<Job> job = BuildMlpJob(spec);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : Job();
}

const OpConf* FindOp(const Job& job, const std::string& type) {
  for (const OpConf& op : job.op()) {
    if (op.op_type() == type) return &op;
  }
  return nullptr;
}

TEST(FusionTest, FusesEveryHiddenBiasAddRelu) {
  MlpSpec spec;
  spec.hidden = {32, 16};
  const Job job = Mlp(spec);
  const std::map<std::string, int> before = CountOpTypes(job);
  ASSERT_EQ(before.at("relu"), 2);
  ASSERT_EQ(before.at("bias_add"), 3);
  const FusionResult result = FuseElementwiseChains(job);
  EXPECT_EQ(result.fused, 2);
  const std::map<std::string, int> after = CountOpTypes(result.job);
  EXPECT_EQ(after.count("relu"), 0u);
  EXPECT_EQ(after.at("bias_add"), 1);  // the logits layer has no relu
  EXPECT_EQ(after.at("bias_add_relu"), 2);
  EXPECT_EQ(result.job.op_size(), job.op_size() - 2);
  const OpConf* fused = FindOp(result.job, "bias_add_relu");
  ASSERT_NE(fused, nullptr);
  EXPECT_NE(AttrView(*fused).GetStringOr("fused_from", "").find('+'), std::string::npos);
  // The relu's output blob survives (its consumers are unchanged); the
  // bias_add's output is gone from the blob list.
  std::map<std::string, int> blobs;
  for (const LogicalBlobDesc& blob : result.job.blob()) ++blobs[blob.lbn()];
  EXPECT_EQ(blobs.count("dense-bias_add/out_0"), 0u);
  EXPECT_EQ(blobs.count("dense_1-bias_add/out_0"), 0u);
  EXPECT_EQ(blobs.count("relu/y_0"), 1u);
  // The variable updates that waited for the bias_add readers wait for the
  // fused ops now (no control input names a removed op).
  std::map<std::string, int> names;
  for (const OpConf& op : result.job.op()) ++names[op.name()];
  int waits = 0;
  for (const OpConf& op : result.job.op()) {
    for (const std::string& name : op.control_input()) {
      EXPECT_EQ(names.count(name), 1u) << op.name() << " waits for a removed op " << name;
      waits += name == "relu" || name == "relu_1";
    }
  }
  EXPECT_GT(waits, 0);
}

TEST(FusionTest, LeavesChainsWithAnotherReaderOrHintsOrCuda) {
  MlpSpec spec;
  const Job job = Mlp(spec);
  const OpConf* bias_add = FindOp(job, "bias_add");
  ASSERT_NE(bias_add, nullptr);
  // A second reader of the bias_add output (a metric).
  Job read_twice = job;
  ArgProto* metric = read_twice.mutable_conf()->mutable_train()->add_metric();
  metric->set_name("pre_activation");
  metric->add_lbn(bias_add->output(0).lbn(0));
  EXPECT_EQ(FuseElementwiseChains(read_twice).fused, 0);
  // An SBP hint on the relu.
  Job hinted = job;
  for (OpConf& op : *hinted.mutable_op()) {
    if (op.op_type() == "relu") op.add_output_sbp_hint()->add_sbp()->set_broadcast(true);
  }
  EXPECT_EQ(FuseElementwiseChains(hinted).fused, 0);
  // CUDA placement: fused as well (kernels/cuda has bias_add_relu).
  Job cuda = job;
  for (OpConf& op : *cuda.mutable_op()) op.mutable_placement()->set_device_type(DEVICE_CUDA);
  EXPECT_EQ(FuseElementwiseChains(cuda).fused, 1);
  EXPECT_EQ(FuseElementwiseChains(job).fused, 1);
}

TEST(FusionTest, CompiledPlansCarryTheFusedKernelUnlessDisabled) {
  for (const std::string placement : {"0:cpu:0", "0:cpu:0-1"}) {
    MlpSpec spec;
    spec.placement = placement;
    spec.batch = 8;
    const Job job = Mlp(spec);
    CompileOptions fuse;
    fuse.fuse = true;
    StatusOr<Plan> fused = Compile(job, MakeCluster(1, 2), fuse);
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_EQ(CountKernelTypes(*fused)["bias_add_relu"], placement == "0:cpu:0" ? 1 : 2);
    EXPECT_EQ(CountKernelTypes(*fused)["relu"], 0);
    StatusOr<Plan> plain = Compile(job, MakeCluster(1, 2));  // fusion is off by default
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(CountKernelTypes(*plain)["bias_add_relu"], 0);
    EXPECT_EQ(CountKernelTypes(*plain)["relu"], CountKernelTypes(*fused)["bias_add_relu"]);
  }
}

TEST(FusionTest, ModelParallelPlansCompile) {
  for (ModelParallel mp : {ModelParallel::kSplitColumns, ModelParallel::kSplitRows}) {
    MlpSpec spec;
    spec.placement = "0:cpu:0-1";
    spec.model_parallel = mp;
    CompileOptions fuse;
    fuse.fuse = true;
    StatusOr<Plan> plan = Compile(Mlp(spec), MakeCluster(1, 2), fuse);
    ASSERT_TRUE(plan.ok()) << plan.status();
  }
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
