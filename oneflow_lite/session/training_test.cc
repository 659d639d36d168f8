// The node session on one machine, in-process: training then evaluation
// through Train (the body of `oflite run` and of the driver's TrainPlan),
// the request checks made before any work, and the files written through an
// injected Env (FakeEnv failing a write).
#include "oneflow_lite/session/training.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/common/testing/fake_env.h"
#include "oneflow_lite/session/exit_codes.h"
#include "oneflow_lite/session/node_session.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace session {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

// A small MLP on Fashion-MNIST, compiled with its evaluation plan.
Plan MlpPlan(int64_t iterations) {
  compiler::MlpSpec spec;
  spec.batch = 32;
  spec.features = 784;
  spec.hidden = {16};
  spec.classes = 10;
  spec.accuracy_metric = true;
  spec.iterations = iterations;
  spec.fashion_mnist_dir = kFashionMnist;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  EXPECT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan = CompileNodePlan(*job, compiler::MakeCluster(1, 1));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  EXPECT_TRUE(Env::Default()->CreateDirectories(dir).ok());
  return dir;
}

NodeOptions OneMachine(Env* env) {
  NodeOptions node;
  node.command = "training_test";
  node.env = env;
  return node;
}

TEST(TrainingTest, TrainsThenEvaluatesAndWritesTheEvalOutKeys) {
  const Plan plan = MlpPlan(20);
  FakeEnv env;
  StatusOr<std::unique_ptr<NodeSession>> node = NodeSession::Start(plan, OneMachine(&env));
  ASSERT_TRUE(node.ok()) << node.status();
  TrainingRequest request;
  request.eval_out = TempDir("train_eval") + "/metrics.eval";
  request.log_every = 10;
  TrainingResult result;
  ASSERT_EQ(Train(node->get(), plan, request, &result), cli::kExitOk);
  EXPECT_EQ(result.start_iteration, 0);
  EXPECT_EQ(result.end_iteration, 20);
  ASSERT_TRUE(result.evaluation.has_value());
  EXPECT_EQ(result.evaluation->samples, plan.eval_plan().total_iters() *
                                            plan.eval_plan().samples_per_iter());
  ASSERT_EQ(result.evaluation->correct.count("accuracy"), 1u);
  const double accuracy = result.evaluation->sums.Means().at("accuracy");
  EXPECT_EQ(result.evaluation->correct.at("accuracy"),
            std::llround(accuracy * static_cast<double>(result.evaluation->samples)));
  StatusOr<std::string> text = env.ReadFileToString(request.eval_out, 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* key : {"accuracy ", "loss ", "accuracy_correct ", "samples "}) {
    EXPECT_NE(("\n" + *text).find(std::string("\n") + key), std::string::npos)
        << key << " missing from:\n" << *text;
  }
  // Written atomically: one rename, no temporary left.
  EXPECT_EQ(env.Count(FileOp::kRename), 1);
}

TEST(TrainingTest, AFailedEvalOutWriteFailsTheRunNamingTheFile) {
  const Plan plan = MlpPlan(2);
  FakeEnv env;
  env.FailNth(FileOp::kRename, 1);
  StatusOr<std::unique_ptr<NodeSession>> node = NodeSession::Start(plan, OneMachine(&env));
  ASSERT_TRUE(node.ok()) << node.status();
  TrainingRequest request;
  request.eval_out = TempDir("failed_eval") + "/metrics.eval";
  testing::internal::CaptureStderr();
  EXPECT_EQ(Train(node->get(), plan, request), cli::kExitFailure);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot write --eval-out '" + request.eval_out + "'"), std::string::npos)
      << err;
  EXPECT_FALSE(Env::Default()->FileExists(request.eval_out));
}

TEST(TrainingTest, RequestsAreCheckedBeforeAnyWork) {
  const Plan plan = MlpPlan(2);
  const std::string dir = TempDir("checks");
  TrainingRequest request;
  request.eval_out = dir + "/missing/folder/x.eval";
  Status checked = CheckTrainingRequest(request, plan);
  EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(checked.message().find("--eval-out"), std::string::npos) << checked;
  EXPECT_NE(checked.message().find(dir + "/missing/folder"), std::string::npos) << checked;

  request = TrainingRequest();
  request.save_every = 1;
  EXPECT_NE(CheckTrainingRequest(request, plan).message().find("--save-every needs"),
            std::string::npos);
  request.checkpoint_dir = "/etc/passwd";
  EXPECT_NE(CheckTrainingRequest(request, plan).message().find("exists and is not a folder"),
            std::string::npos);
  request.checkpoint_dir = dir + "/ckpt";  // created by Train, not by the check
  EXPECT_TRUE(CheckTrainingRequest(request, plan).ok());
  EXPECT_FALSE(Env::Default()->FileExists(request.checkpoint_dir));

  request = TrainingRequest();
  request.metrics_out = dir;  // a folder
  EXPECT_NE(CheckTrainingRequest(request, plan).message().find("is a folder"), std::string::npos);
}

TEST(TrainingTest, ResumesFromTheNewestCheckpointAndRefusesAnEditedManifest) {
  const Plan plan = MlpPlan(6);
  const std::string root = TempDir("resume") + "/ckpt";
  {
    StatusOr<std::unique_ptr<NodeSession>> node =
        NodeSession::Start(plan, OneMachine(Env::Default()));
    ASSERT_TRUE(node.ok());
    TrainingRequest request;
    request.save_every = 3;
    request.checkpoint_dir = root;
    request.evaluate = false;
    ASSERT_EQ(Train(node->get(), plan, request), cli::kExitOk);
  }
  StatusOr<std::unique_ptr<NodeSession>> node =
      NodeSession::Start(plan, OneMachine(Env::Default()));
  ASSERT_TRUE(node.ok());
  TrainingRequest request;
  request.resume = root;
  request.evaluate = false;
  TrainingResult result;
  ASSERT_EQ(Train(node->get(), plan, request, &result), cli::kExitOk);
  EXPECT_EQ(result.start_iteration, 6);
  // The newest MANIFEST claims an iteration past the run: refused naming it,
  // the older checkpoint offered.
  const std::string manifest = root + "/iter-6/MANIFEST";
  StatusOr<std::string> text = Env::Default()->ReadFileToString(manifest, 1 << 20);
  ASSERT_TRUE(text.ok());
  const size_t at = text->find("iteration 6");
  ASSERT_NE(at, std::string::npos) << *text;
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomically(manifest, text->replace(at, 11, "iteration 60"))
                  .ok());
  testing::internal::CaptureStderr();
  EXPECT_EQ(Train(node->get(), plan, request), cli::kExitBadInput);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(manifest + " records iteration 60, outside this run's [0, 6]"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("resume from it with --resume " + root + "/iter-3"), std::string::npos)
      << err;
}

}  // namespace
}  // namespace session
}  // namespace oflite
