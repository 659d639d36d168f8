// `oflite run` runs what the plan file says and nothing else: with the
// embedded Job removed from the training and evaluation plans it still
// trains and evaluates (run settings, variable descs and the evaluation
// plan are Plan fields), it takes the test line's sample count from the
// evaluation plan's samples_per_iter, and a plan whose evaluation could not
// be compiled fails after training with the compiler's note.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "tools/oflite/commands.h"

namespace oflite {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

Plan FashionPlan() {
  compiler::MlpSpec spec;
  spec.batch = 100;
  spec.features = 784;
  spec.hidden = {8};
  spec.classes = 10;
  spec.accuracy_metric = true;
  spec.iterations = 3;
  spec.fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  CHECK(job.ok()) << job.status();
  StatusOr<Plan> plan = CompileNodePlan(*job, compiler::MakeCluster(1, 1));
  CHECK(plan.ok()) << plan.status();
  return *plan;
}

struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};

RunResult RunPlan(const Plan& plan, const std::string& name) {
  const std::string path = TmpPath(name);
  CHECK(SavePlan(path, plan).ok());
  std::vector<std::string> args = {"run", "--plan", path, "--log-every", "1"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  RunResult result;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  result.code = cli::RunRun(static_cast<int>(argv.size()), argv.data());
  result.out = testing::internal::GetCapturedStdout();
  result.err = testing::internal::GetCapturedStderr();
  return result;
}

TEST(RunPlanContractTest, RunsWithoutTheEmbeddedJob) {
  Plan plan = FashionPlan();
  ASSERT_EQ(plan.eval_state(), EVAL_COMPILED);
  plan.clear_job();
  plan.mutable_eval_plan()->clear_job();
  // The test line counts samples with the evaluation plan's own setting.
  plan.mutable_eval_plan()->set_samples_per_iter(7);
  const int64_t eval_iters = plan.eval_plan().total_iters();
  const RunResult run = RunPlan(plan, "nojob.plan.pb");
  ASSERT_EQ(run.code, cli::kExitOk) << run.out << run.err;
  EXPECT_NE(run.out.find("iter 3/3"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("test (" + std::to_string(eval_iters * 7) + " samples"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("accuracy"), std::string::npos) << run.out;
}

TEST(RunPlanContractTest, UnavailableEvaluationFailsAfterTrainingWithTheNote) {
  Plan plan = FashionPlan();
  plan.clear_eval_plan();
  plan.set_eval_state(EVAL_UNAVAILABLE);
  plan.set_eval_note("op 'dense': something the compiler refused");
  const RunResult run = RunPlan(plan, "unavailable.plan.pb");
  EXPECT_EQ(run.code, cli::kExitFailure) << run.out << run.err;
  EXPECT_NE(run.out.find("trained iterations 0..3"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("the plan has no evaluation plan: op 'dense': something the compiler "
                         "refused (run with --eval=false"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace oflite
