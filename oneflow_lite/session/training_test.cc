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

// --eval-every 10 over 25 iterations: validation passes after iterations 10
// and 20 (val_ lines in --metrics-out), and the segments train exactly as
// one run: the same per-iteration losses and the same final evaluation.
TEST(TrainingTest, EvalEveryValidatesBetweenSegmentsWithoutChangingTraining) {
  const Plan plan = MlpPlan(25);
  const std::string dir = TempDir("eval_every");
  auto run = [&](int64_t eval_every, const std::string& tag, TrainingResult* result) {
    StatusOr<std::unique_ptr<NodeSession>> node =
        NodeSession::Start(plan, OneMachine(Env::Default()));
    ASSERT_TRUE(node.ok()) << node.status();
    TrainingRequest request;
    request.eval_every = eval_every;
    request.metrics_out = dir + "/" + tag + ".metrics";
    request.save_every = 5;
    request.checkpoint_dir = dir + "/" + tag + "_ckpt";
    ASSERT_TRUE(CheckTrainingRequest(request, plan).ok());
    ASSERT_EQ(Train(node->get(), plan, request, result), cli::kExitOk);
  };
  TrainingResult plain, segmented;
  run(0, "plain", &plain);
  run(10, "segmented", &segmented);
  EXPECT_EQ(segmented.start_iteration, 0);
  EXPECT_EQ(segmented.end_iteration, 25);
  auto lines = [&](const std::string& tag, bool validation) {
    StatusOr<std::string> text =
        Env::Default()->ReadFileToString(dir + "/" + tag + ".metrics", 1 << 20);
    EXPECT_TRUE(text.ok()) << text.status();
    std::string kept;
    size_t begin = 0;
    while (text.ok() && begin < text->size()) {
      size_t end = text->find('\n', begin);
      if (end == std::string::npos) end = text->size();
      const std::string line = text->substr(begin, end - begin);
      if ((line.find(" val_") != std::string::npos) == validation) kept += line + "\n";
      begin = end + 1;
    }
    return kept;
  };
  EXPECT_EQ(lines("plain", false), lines("segmented", false));
  EXPECT_EQ(lines("plain", true), "");
  const std::string validation = lines("segmented", true);
  EXPECT_NE(validation.find("9 val_loss "), std::string::npos) << validation;
  EXPECT_NE(validation.find("19 val_loss "), std::string::npos) << validation;
  EXPECT_NE(validation.find("9 val_accuracy "), std::string::npos) << validation;
  // The final evaluation ends the validation curve.
  EXPECT_NE(validation.find("24 val_loss "), std::string::npos) << validation;
  ASSERT_TRUE(plain.evaluation.has_value() && segmented.evaluation.has_value());
  EXPECT_EQ(plain.evaluation->sums.Means(), segmented.evaluation->sums.Means());
  // Checkpoints keep their schedule (every 5) across the segments.
  for (const char* iter : {"/iter-5/MANIFEST", "/iter-15/MANIFEST", "/iter-25/MANIFEST"}) {
    EXPECT_TRUE(Env::Default()->FileExists(dir + "/segmented_ckpt" + iter)) << iter;
  }

  TrainingRequest bad;
  bad.eval_every = 10;
  bad.evaluate = false;
  EXPECT_NE(CheckTrainingRequest(bad, plan).message().find("--eval-every needs --eval=true"),
            std::string::npos);
}

}  // namespace
}  // namespace session
}  // namespace oflite
