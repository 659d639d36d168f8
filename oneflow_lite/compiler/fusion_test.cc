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
    for (bool matmul_bias : {false, true}) {
      MlpSpec spec;
      spec.placement = "0:cpu:0-1";
      spec.model_parallel = mp;
      CompileOptions fuse;
      fuse.fuse = true;
      fuse.fuse_matmul_bias = matmul_bias;
      StatusOr<Plan> plan = Compile(Mlp(spec), MakeCluster(1, 2), fuse);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(CountKernelTypes(*plan)["matmul_bias"] > 0, matmul_bias);
    }
  }
}

TEST(FusionTest, FusesGeluWithItsGradient) {
  MlpSpec spec;
  spec.hidden = {32, 16};
  spec.activation = "gelu";
  const Job job = Mlp(spec);
  const std::map<std::string, int> before = CountOpTypes(job);
  ASSERT_EQ(before.at("gelu"), 2);
  ASSERT_EQ(before.at("gelu_grad"), 2);
  const int muls = before.count("mul") ? before.at("mul") : 0;
  const FusionResult result = FuseElementwiseChains(job);
  EXPECT_EQ(result.fused, 2);
  const std::map<std::string, int> after = CountOpTypes(result.job);
  EXPECT_EQ(after.count("gelu"), 0u);
  EXPECT_EQ(after.count("gelu_grad"), 0u);
  EXPECT_EQ(after.at("gelu_and_derivative"), 2);
  EXPECT_EQ(after.at("mul"), muls + 2);
  EXPECT_EQ(result.job.op_size(), job.op_size());
  // The gradient's name and output blob stay; it reads the saved derivative.
  std::map<std::string, const OpConf*> by_name;
  for (const OpConf& op : result.job.op()) by_name[op.name()] = &op;
  int derivative_blobs = 0;
  for (const LogicalBlobDesc& blob : result.job.blob()) {
    derivative_blobs += blob.lbn().find("/dydx_0") != std::string::npos;
  }
  EXPECT_EQ(derivative_blobs, 2);
  for (const OpConf& op : job.op()) {
    if (op.op_type() != "gelu_grad") continue;
    const OpConf* mul = by_name.at(op.name());
    EXPECT_EQ(mul->op_type(), "mul");
    EXPECT_TRUE(mul->is_backward());
    ASSERT_EQ(mul->input_size(), 2);
    EXPECT_EQ(mul->input(0).lbn(0), op.input(0).lbn(0));  // dy
    EXPECT_NE(mul->input(1).lbn(0).find("/dydx_0"), std::string::npos);
    EXPECT_EQ(mul->output(0).lbn(0), op.output(0).lbn(0));
  }
  // Not the tanh form, not with another reader of x, not on CUDA.
  Job tanh = job;
  for (OpConf& op : *tanh.mutable_op()) {
    if (op.op_type() != "gelu" && op.op_type() != "gelu_grad") continue;
    AttrEntry* entry = op.add_attr();
    entry->set_key("approximate");
    entry->mutable_value()->set_s("tanh");
  }
  EXPECT_EQ(FuseElementwiseChains(tanh).fused, 0);
  Job read_twice = job;
  const OpConf* gelu = FindOp(job, "gelu");
  ASSERT_NE(gelu, nullptr);
  ArgProto* metric = read_twice.mutable_conf()->mutable_train()->add_metric();
  metric->set_name("pre_activation");
  metric->add_lbn(gelu->input(0).lbn(0));
  EXPECT_EQ(FuseElementwiseChains(read_twice).fused, 1);
  Job cuda = job;
  for (OpConf& op : *cuda.mutable_op()) op.mutable_placement()->set_device_type(DEVICE_CUDA);
  EXPECT_EQ(FuseElementwiseChains(cuda).fused, 0);
}

FusionOptions MatmulBiasOnly() {
  FusionOptions options;
  options.bias_add_relu = false;
  options.gelu_derivative = false;
  options.matmul_bias = true;
  return options;
}

TEST(FusionTest, FusesMatmulBiasAddWhenAsked) {
  MlpSpec spec;
  spec.hidden = {32, 16};
  const Job job = Mlp(spec);
  const std::map<std::string, int> before = CountOpTypes(job);
  // Both passes: the hidden layers keep bias_add -> relu (exact), the
  // logits layer's matmul -> bias_add becomes matmul_bias.
  FusionOptions both;
  both.matmul_bias = true;
  const FusionResult result = FuseOps(job, both);
  EXPECT_EQ(result.fused, 3);
  std::map<std::string, int> after = CountOpTypes(result.job);
  EXPECT_EQ(after.at("bias_add_relu"), 2);
  EXPECT_EQ(after.at("matmul_bias"), 1);
  EXPECT_EQ(after.count("bias_add"), 0u);
  EXPECT_EQ(after.at("matmul"), before.at("matmul") - 1);  // the gradients' matmuls stay
  const OpConf* fused = FindOp(result.job, "matmul_bias");
  ASSERT_NE(fused, nullptr);
  ASSERT_EQ(fused->input_size(), 3);
  EXPECT_EQ(fused->input(2).name(), "bias");
  EXPECT_EQ(AttrView(*fused).GetStringOr("fused_from", ""), "dense_2-matmul+dense_2-bias_add");
  EXPECT_EQ(fused->name(), "dense_2-bias_add");
  std::map<std::string, int> blobs;
  for (const LogicalBlobDesc& blob : result.job.blob()) ++blobs[blob.lbn()];
  EXPECT_EQ(blobs.count("dense_2-matmul/out_0"), 0u);
  EXPECT_EQ(blobs.count("dense_2-bias_add/out_0"), 1u);
  std::map<std::string, int> names;
  for (const OpConf& op : result.job.op()) ++names[op.name()];
  for (const OpConf& op : result.job.op()) {
    for (const std::string& name : op.control_input()) {
      EXPECT_EQ(names.count(name), 1u) << op.name() << " waits for a removed op " << name;
    }
  }
  // Alone: every layer's matmul -> bias_add.
  const FusionResult alone = FuseOps(job, MatmulBiasOnly());
  EXPECT_EQ(alone.fused, 3);
  after = CountOpTypes(alone.job);
  EXPECT_EQ(after.at("matmul_bias"), 3);
  EXPECT_EQ(after.at("relu"), 2);
  // Off by default.
  EXPECT_EQ(CountOpTypes(FuseElementwiseChains(job).job).count("matmul_bias"), 0u);
}

TEST(FusionTest, LeavesMatmulsThatAreNotOneCpuGemm) {
  MlpSpec spec;
  const Job job = Mlp(spec);  // one hidden layer: two matmul -> bias_add pairs
  ASSERT_EQ(FuseOps(job, MatmulBiasOnly()).fused, 2);
  // alpha != 1 (oneDNN's output scale would scale the bias too).
  Job scaled = job;
  for (OpConf& op : *scaled.mutable_op()) {
    if (op.op_type() != "matmul" || op.is_backward()) continue;
    for (AttrEntry& entry : *op.mutable_attr()) {
      if (entry.key() == "alpha") entry.mutable_value()->set_f(0.5);
    }
  }
  EXPECT_EQ(FuseOps(scaled, MatmulBiasOnly()).fused, 0);
  // A second reader of a matmul's output.
  Job read_twice = job;
  const OpConf* matmul = FindOp(job, "matmul");
  ASSERT_NE(matmul, nullptr);
  ArgProto* metric = read_twice.mutable_conf()->mutable_train()->add_metric();
  metric->set_name("product");
  metric->add_lbn(matmul->output(0).lbn(0));
  EXPECT_EQ(FuseOps(read_twice, MatmulBiasOnly()).fused, 1);
  // CUDA placement: no matmul_bias kernel there.
  Job cuda = job;
  for (OpConf& op : *cuda.mutable_op()) op.mutable_placement()->set_device_type(DEVICE_CUDA);
  EXPECT_EQ(FuseOps(cuda, MatmulBiasOnly()).fused, 0);
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
