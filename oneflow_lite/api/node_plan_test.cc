// CompileNodePlan writes the whole contract: run settings, variable descs,
// collective algorithms and, for a training job, the evaluation plan.
#include "oneflow_lite/api/node_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "oneflow_lite/api/eval_job.h"
#include "oneflow_lite/common/version.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

using compiler::BuildMlpJob;
using compiler::MakeCluster;
using compiler::MlpSpec;

MlpSpec FashionMlp(const std::string& placement) {
  MlpSpec spec;
  spec.batch = 32;
  spec.features = 784;
  spec.hidden = {16};
  spec.classes = 10;
  spec.placement = placement;
  spec.accuracy_metric = true;
  spec.iterations = 7;
  spec.fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";
  return spec;
}

// Variable op name -> logical desc, read from the job's variable ops.
std::map<std::string, TensorDescProto> JobVariables(const Job& job) {
  std::map<std::string, TensorDescProto> descs;
  for (const LogicalBlobDesc& blob : job.blob()) descs[blob.lbn()] = blob.desc();
  std::map<std::string, TensorDescProto> variables;
  for (const OpConf& op : job.op()) {
    if (op.op_type() == "variable") variables[op.name()] = descs.at(op.name() + "/out_0");
  }
  return variables;
}

TEST(NodePlanTest, TrainingPlanCarriesRunSettingsVariablesAndItsEvalPlan) {
  StatusOr<Job> job = BuildMlpJob(FashionMlp("0:cpu:0-1"));
  ASSERT_TRUE(job.ok()) << job.status();
  job->mutable_conf()->set_seed(1234);
  StatusOr<Plan> plan = CompileNodePlan(*job, MakeCluster(1, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->version(), kPlanVersion);
  EXPECT_EQ(plan->seed(), 1234);
  EXPECT_EQ(plan->total_iters(), 7);
  EXPECT_EQ(plan->samples_per_iter(), 32);
  EXPECT_TRUE(plan->is_train());

  const std::map<std::string, TensorDescProto> expected = JobVariables(*job);
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(plan->variable_size(), static_cast<int>(expected.size()));
  for (const VariableDesc& v : plan->variable()) {
    ASSERT_EQ(expected.count(v.name()), 1u) << v.name();
    EXPECT_EQ(v.desc().SerializeAsString(), expected.at(v.name()).SerializeAsString()) << v.name();
  }

  ASSERT_EQ(plan->eval_state(), EVAL_COMPILED);
  ASSERT_TRUE(plan->has_eval_plan());
  const Plan& eval = plan->eval_plan();
  StatusOr<Job> eval_job = MakeEvalJob(*job);
  ASSERT_TRUE(eval_job.ok()) << eval_job.status();
  EXPECT_EQ(eval.version(), kPlanVersion);
  EXPECT_FALSE(eval.is_train());
  EXPECT_EQ(eval.total_iters(), eval_job->conf().total_iters());
  EXPECT_EQ(eval.total_iters(), 10000 / 32);
  EXPECT_EQ(eval.seed(), 1234);
  EXPECT_EQ(eval.samples_per_iter(), 32);
  EXPECT_EQ(eval.machine_size(), plan->machine_size());
  EXPECT_FALSE(eval.has_eval_plan());
  // The same variables (the trained ones are restored into it), no updates.
  ASSERT_EQ(eval.variable_size(), plan->variable_size());
  for (const MachinePlan& m : eval.machine()) {
    for (const TaskProto& t : m.task()) {
      for (const KernelConf& k : t.kernel()) EXPECT_FALSE(k.op().is_optimizer()) << t.name();
    }
  }
}

TEST(NodePlanTest, NoTestSplitAndInferenceJobsCarryNoEvalPlan) {
  MlpSpec synthetic;  // random_batch source: no test split
  StatusOr<Job> job = BuildMlpJob(synthetic);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan = CompileNodePlan(*job, MakeCluster(1, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->eval_state(), EVAL_NO_TEST_SPLIT);
  EXPECT_FALSE(plan->has_eval_plan());
  EXPECT_EQ(plan->samples_per_iter(), synthetic.batch);

  MlpSpec inference = FashionMlp("0:cpu:0");
  inference.train = false;
  job = BuildMlpJob(inference);
  ASSERT_TRUE(job.ok()) << job.status();
  plan = CompileNodePlan(*job, MakeCluster(1, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->is_train());
  EXPECT_EQ(plan->eval_state(), EVAL_NOT_COMPILED);
  EXPECT_FALSE(plan->has_eval_plan());
}

TEST(NodePlanTest, EveryCollectiveOfTrainingAndEvalPlansHasACompiledAlgorithm) {
  StatusOr<Job> job = BuildMlpJob(FashionMlp("0-1:cpu:0"));
  ASSERT_TRUE(job.ok()) << job.status();
  // The ring for every all-reduce (the size rule off); the exchange for
  // small ones is checked in recorded_algorithm_test.
  compiler::CompileOptions options;
  options.exchange_max_bytes = 0;
  StatusOr<Plan> plan = CompileNodePlan(*job, MakeCluster(2, 1), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->eval_state(), EVAL_COMPILED);
  int rings = 0;
  for (const Plan* p : std::vector<const Plan*>{&*plan, &plan->eval_plan()}) {
    for (const MachinePlan& m : p->machine()) {
      for (const TaskProto& t : m.task()) {
        if (t.type() != TASK_COLLECTIVE) continue;
        EXPECT_NE(t.collective().algorithm(), COLLECTIVE_UNSET) << t.name();
        if (t.collective().algorithm() == COLLECTIVE_RING_ALL_REDUCE) ++rings;
      }
    }
  }
  // Data parallel on 2 machines: the gradients' P->B all-reduces use the ring.
  EXPECT_GT(rings, 0);
}

}  // namespace
}  // namespace oflite
