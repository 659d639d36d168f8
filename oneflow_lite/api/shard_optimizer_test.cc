// The sharded-optimizer pass (ZeRO): what it hints and adds, the plan it
// compiles to (reduce-scatter for gradients, all-gather for parameters,
// variables and states stored once over the devices), the clipping rewrite,
// and the errors. Training equal to one device: tests/zero_train_test.cc
// (in process) and tests/zero_test.sh (processes).
#include "oneflow_lite/api/shard_optimizer.h"

#include <gtest/gtest.h>

#include <map>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/compiler/plan_summary.h"
#include "oneflow_lite/ops/sbp.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

// 16 -> 30 -> classes, AdamW (decay on matrices only), cosine schedule,
// global-norm clipping at 0.5 (it clips from the first step).
StatusOr<Job> ClippedJob(const std::string& placement, int64_t classes, int64_t iterations) {
  Graph g("zero", /*seed=*/5);
  Batch data = RandomBatch(&g, Shape{8, 16}, classes);
  Tensor logits = Dense(&g, g.Relu(Dense(&g, data.image, 30)), classes);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label),
             AdamW{.learning_rate = 0.02, .weight_decay = 0.1},
             MinimizeOptions{.schedule = LrScheduleOptions::Cosine(3),
                             .clip_global_norm = 0.5,
                             .weight_decay_min_rank = 2});
  g.SetIterations(iterations);
  g.SetPlacement(Placement::Parse(placement));
  return g.Build();
}

StatusOr<Job> AdamMlp(const std::string& placement, int64_t features = 16) {
  compiler::MlpSpec spec;
  spec.placement = placement;
  spec.features = features;
  spec.optimizer = compiler::MlpOptimizer::kAdam;
  spec.iterations = 20;
  return compiler::BuildMlpJob(spec);
}

const OpConf& Op(const Job& job, const std::string& name) {
  const OpConf* op = FindOp(job, name);
  EXPECT_NE(op, nullptr) << name;
  static const OpConf kMissing;
  return op == nullptr ? kMissing : *op;
}

std::string OutputHint(const OpConf& op) {
  if (op.output_sbp_hint_size() == 0 || op.output_sbp_hint(0).sbp_size() == 0) return "none";
  return SbpToString(op.output_sbp_hint(0).sbp(0));
}

std::vector<std::string> InputHints(const OpConf& op) {
  std::vector<std::string> hints;
  for (const NdSbp& hint : op.input_sbp_hint()) hints.push_back(SbpToString(hint.sbp(0)));
  return hints;
}

// Bytes of persistent registers (variables) over the whole plan.
int64_t PersistentBytes(const Plan& plan) {
  int64_t bytes = 0;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      for (const RegstDescProto& regst : task.produced()) {
        if (regst.is_persistent()) bytes += regst.bytes_per_regst() * regst.regst_num();
      }
    }
  }
  return bytes;
}

TEST(ShardOptimizerTest, HintsVariablesStatesUpdatesAndGathersForReaders) {
  StatusOr<Job> job = AdamMlp("0:cpu:0-1");
  ASSERT_TRUE(job.ok()) << job.status();
  ShardOptimizerReport report;
  StatusOr<Job> sharded = ShardOptimizerStates(*job, &report);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(report.sharded.size(), 4u);
  EXPECT_TRUE(report.kept.empty());
  for (const char* variable : {"dense-weight", "dense-bias", "dense_1-weight", "dense_1-bias"}) {
    const std::string v = variable;
    EXPECT_EQ(OutputHint(Op(*sharded, v)), "S(0)") << v;
    EXPECT_EQ(OutputHint(Op(*sharded, v + "-m")), "S(0)") << v;
    EXPECT_EQ(OutputHint(Op(*sharded, v + "-v")), "S(0)") << v;
    const OpConf& gathered = Op(*sharded, v + "-gathered");
    EXPECT_EQ(gathered.op_type(), "identity");
    EXPECT_EQ(OutputHint(gathered), "B");
    // Only the gathered copy and the update read the variable.
    EXPECT_EQ(ConsumersOf(*sharded, v + "/out_0"),
              (std::vector<std::string>{v + "-gathered", v + "-update"}));
    EXPECT_FALSE(ConsumersOf(*sharded, v + "-gathered/out_0").empty());
    const OpConf& update = Op(*sharded, v + "-update");
    EXPECT_EQ(InputHints(update), (std::vector<std::string>{"S(0)", "S(0)", "S(0)", "S(0)"}));
    ASSERT_EQ(update.control_input_size(), 1);
    EXPECT_EQ(update.control_input(0), v + "-gathered");
  }
  // Without the pass nothing changes: the job is the optimizer pass's.
  EXPECT_EQ(OutputHint(Op(*job, "dense-weight")), "none");
}

TEST(ShardOptimizerTest, GradientsAreReduceScatteredAndVariablesStoredOnce) {
  StatusOr<Job> job = AdamMlp("0:cpu:0-1", /*features=*/256);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Job> sharded = ShardOptimizerStates(*job);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  StatusOr<Plan> plain = compiler::Compile(*job, compiler::MakeCluster(1, 2));
  StatusOr<Plan> zero = compiler::Compile(*sharded, compiler::MakeCluster(1, 2));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(zero.ok()) << zero.status();
  compiler::PlanSummary p = compiler::Summarize(*plain), z = compiler::Summarize(*zero);
  EXPECT_EQ(compiler::CountBoxing(p, BOXING_ALL_REDUCE), 4);
  EXPECT_EQ(compiler::CountBoxing(p, BOXING_REDUCE_SCATTER), 0);
  EXPECT_EQ(compiler::CountBoxing(z, BOXING_ALL_REDUCE), 0);
  EXPECT_EQ(compiler::CountBoxing(z, BOXING_REDUCE_SCATTER), 4);
  // 4 parameters gathered (once each, for forward and backward) + the loss.
  EXPECT_EQ(compiler::CountBoxing(z, BOXING_ALL_GATHER),
            compiler::CountBoxing(p, BOXING_ALL_GATHER) + 4);
  // Parameters and Adam's m and v: (256*32 + 32 + 32*4 + 4) floats x 3 = 100272
  // bytes, twice without sharding, once with it (up to the alignment of 24
  // registers: plain 202752, sharded 102912).
  const int64_t logical = (256 * 32 + 32 + 32 * 4 + 4) * 3 * 4;
  EXPECT_NEAR(static_cast<double>(PersistentBytes(*plain)), 2.0 * logical, 0.03 * logical);
  EXPECT_NEAR(static_cast<double>(PersistentBytes(*zero)), 1.0 * logical, 0.03 * logical);
  // The evaluation plan compiles too (the gathered copies are forward ops).
  StatusOr<Plan> node = CompileNodePlan(*sharded, compiler::MakeCluster(1, 2));
  ASSERT_TRUE(node.ok()) << node.status();
}

TEST(ShardOptimizerTest, ClippingBecomesSquareSumsOfShardsAndWholeGradients) {
  // classes 3 over 4 devices: dense_1-bias [3] cannot be split and stays B,
  // so the norm has a sharded (P) and a whole (B) part.
  StatusOr<Job> job = ClippedJob("0:cpu:0-3", 3, 5);
  ASSERT_TRUE(job.ok()) << job.status();
  ShardOptimizerReport report;
  StatusOr<Job> sharded = ShardOptimizerStates(*job, &report);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  ASSERT_EQ(report.kept.size(), 1u);
  EXPECT_NE(report.kept[0].find("'dense_1-bias' float32(3,) has no axis of 4 or more rows"),
            std::string::npos)
      << report.kept[0];
  EXPECT_EQ(OutputHint(Op(*sharded, "dense_1-bias")), "none");
  const OpConf& clip = Op(*sharded, "optimizer-clip_scale");
  EXPECT_EQ(clip.op_type(), "clip_scale_from_square_sum");
  ASSERT_EQ(clip.input_size(), 1);
  EXPECT_EQ(clip.input(0).lbn_size(), 2);
  const OpConf& partial = Op(*sharded, "optimizer-clip_scale-square_sum");
  EXPECT_EQ(partial.op_type(), "square_sum");
  EXPECT_EQ(partial.input(0).lbn_size(), 3);
  EXPECT_EQ(InputHints(partial), (std::vector<std::string>{"S(0)", "S(0)", "S(0)"}));
  EXPECT_EQ(OutputHint(partial), "P");
  const OpConf& whole = Op(*sharded, "optimizer-clip_scale-square_sum_1");
  EXPECT_EQ(InputHints(whole), (std::vector<std::string>{"B"}));
  EXPECT_EQ(OutputHint(whole), "B");
  // Every update reads the same scale.
  EXPECT_EQ(ConsumersOf(*sharded, "optimizer-clip_scale/out_0").size(), 4u);
  StatusOr<Plan> plan = compiler::Compile(*sharded, compiler::MakeCluster(1, 4));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Gradients: 3 reduce-scatters, the unsplit bias all-reduced, and the
  // float64 partial sum of squares all-reduced (8 bytes).
  compiler::PlanSummary summary = compiler::Summarize(*plan);
  EXPECT_EQ(compiler::CountBoxing(summary, BOXING_REDUCE_SCATTER), 3);
  EXPECT_EQ(compiler::CountBoxing(summary, BOXING_ALL_REDUCE), 2);
}

TEST(ShardOptimizerTest, OneDeviceIsAnErrorWithASuggestion) {
  StatusOr<Job> job = AdamMlp("0:cpu:0");
  ASSERT_TRUE(job.ok());
  StatusOr<Job> sharded = ShardOptimizerStates(*job);
  ASSERT_FALSE(sharded.ok());
  const std::string message = sharded.status().message();
  EXPECT_NE(message.find("--shard-optimizer: every variable is on one device ('0:cpu:0')"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--devices 2"), std::string::npos) << message;
}

TEST(ShardOptimizerTest, BroadcastDataIsNotDataParallel) {
  Graph g("bdata", 1);
  Batch data = RandomBatch(&g, Shape{8, 16}, 4, Broadcast());
  g.Minimize(g.SparseSoftmaxCrossEntropy(Dense(&g, data.image, 4), data.label), Adam{});
  g.SetIterations(2);
  g.SetPlacement(Placement::Parse("0:cpu:0-1"));
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Job> sharded = ShardOptimizerStates(*job);
  ASSERT_FALSE(sharded.ok());
  EXPECT_NE(sharded.status().message().find("is hinted B on '0:cpu:0-1'"), std::string::npos)
      << sharded.status();
  EXPECT_NE(sharded.status().message().find("not data parallel"), std::string::npos)
      << sharded.status();
}

TEST(ShardOptimizerTest, TensorParallelLayoutsAreKeptAndNamed) {
  compiler::MlpSpec spec;
  spec.placement = "0:cpu:0-1";
  spec.model_parallel = compiler::ModelParallel::kSplitColumns;
  spec.optimizer = compiler::MlpOptimizer::kMomentum;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ShardOptimizerReport report;
  StatusOr<Job> sharded = ShardOptimizerStates(*job, &report);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  ASSERT_EQ(report.kept.size(), 2u);
  EXPECT_EQ(report.kept[0], "'b0' keeps its own layout S(0)");
  EXPECT_EQ(report.kept[1], "'w0' keeps its own layout S(1)");
  EXPECT_EQ(OutputHint(Op(*sharded, "w0")), "S(1)");
  EXPECT_EQ(OutputHint(Op(*sharded, "dense_1-weight-momentum")), "S(0)");
  StatusOr<Plan> plan = compiler::Compile(*sharded, compiler::MakeCluster(1, 2));
  EXPECT_TRUE(plan.ok()) << plan.status();
}

TEST(ShardOptimizerTest, ForwardJobsAndHierarchiesAreRefused) {
  StatusOr<Job> job = AdamMlp("0:cpu:0-1");
  ASSERT_TRUE(job.ok());
  Job forward = *job;
  forward.mutable_conf()->set_is_train(false);
  StatusOr<Job> sharded = ShardOptimizerStates(forward);
  ASSERT_FALSE(sharded.ok());
  EXPECT_NE(sharded.status().message().find("does not train"), std::string::npos)
      << sharded.status();
  StatusOr<Job> nested = AdamMlp("0:cpu:0-3@2x2");
  ASSERT_TRUE(nested.ok()) << nested.status();
  sharded = ShardOptimizerStates(*nested);
  ASSERT_FALSE(sharded.ok());
  EXPECT_NE(sharded.status().message().find("hierarchical placement '0:cpu:0-3@2x2'"),
            std::string::npos)
      << sharded.status();
  EXPECT_NE(sharded.status().message().find("'0:cpu:0-3'"), std::string::npos) << sharded.status();
}

}  // namespace
}  // namespace oflite
