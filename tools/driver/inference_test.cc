// RunInference with HostInput: one run of an inference plan whose input
// each iteration is computed by the program from the previous output (a
// feedback loop, as text generation does), variables from a checkpoint;
// a feed nobody pushes to ends in its timeout naming the op, the feed and
// the iteration; a pushed tensor of the wrong shape names both.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/common/host_tensor.h"
#include "tools/driver/trainer.h"

namespace oflite {
namespace driver {
namespace {

using std::chrono::milliseconds;

// y = x * w with x a float32 [2] host input named `feed`, w a variable [2];
// output "y".
StatusOr<Plan> ScalePlan(const std::string& feed, milliseconds timeout, const Shape& x_shape = {2},
                         const std::string& placement = "0:cpu:0") {
  Graph g("scale", /*seed=*/1);
  g.SetPlacement(*Placement::Parse(placement));
  Tensor x = HostInput(&g, feed, x_shape, DT_FLOAT, "x", timeout);
  Tensor w = g.Variable("w", Shape{2});
  g.AddOutput("y", g.Mul(x, w));
  ASSIGN_OR_RETURN(Job job, g.BuildForward());
  return CompileInferencePlan(job);
}

// A checkpoint holding w = {2, 3}, under the test's temporary folder.
std::string SaveWeights(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::map<std::string, HostTensor> variables;
  variables.emplace("w", HostTensor::FromVector<float>(Shape{2}, {2.0f, 3.0f}));
  EXPECT_TRUE(SaveVariables(dir, /*iteration=*/7, variables).ok());
  return dir;
}

HostTensor Vector2(float a, float b) { return HostTensor::FromVector<float>(Shape{2}, {a, b}); }

session::NodeOptions Options() {
  session::NodeOptions options;
  options.command = "inference_test";
  return options;
}

TEST(InferenceTest, EachIterationReadsWhatTheCallbackPushed) {
  const std::string feed = "inference_test.loop";
  StatusOr<Plan> plan = ScalePlan(feed, milliseconds(20000));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->is_train());
  const std::string checkpoint = SaveWeights("loop");

  // x_0 = (1, 1); x_{i+1} = y_i + 1, y_i = x_i * (2, 3).
  ASSERT_TRUE(HostFeed::Push(feed, Vector2(1, 1)).ok());
  std::mutex mutex;
  std::vector<int64_t> iterations;
  std::vector<std::vector<float>> outputs;
  const int code = RunInference(
      *plan, checkpoint, /*iterations=*/5,
      [&](int64_t iteration, const std::string& name, const HostTensor& value) {
        std::lock_guard<std::mutex> lock(mutex);
        EXPECT_EQ(name, "y");
        EXPECT_EQ(value.desc(), TensorDesc(Shape{2}, DT_FLOAT));
        const std::vector<float> y = value.ToVector<float>();
        iterations.push_back(iteration);
        outputs.push_back(y);
        ASSERT_TRUE(HostFeed::Push(feed, Vector2(y[0] + 1, y[1] + 1)).ok());
      },
      Options());
  ASSERT_EQ(code, 0);
  EXPECT_EQ(iterations, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  std::vector<std::vector<float>> expected;
  float x0 = 1, x1 = 1;
  for (int i = 0; i < 5; ++i) {
    expected.push_back({x0 * 2, x1 * 3});
    x0 = x0 * 2 + 1;
    x1 = x1 * 3 + 1;
  }
  // (2, 3), (6, 12), (14, 39), (30, 120), (62, 363): exact in float32.
  EXPECT_EQ(outputs, expected);
  // The push answering the last iteration was dropped when the run ended.
  EXPECT_EQ(HostFeed::Pending(feed), 0);

  // A second run of the same plan starts clean.
  ASSERT_TRUE(HostFeed::Push(feed, Vector2(-1, 0.5f)).ok());
  std::vector<float> last;
  ASSERT_EQ(RunInference(
                *plan, checkpoint, 1,
                [&](int64_t, const std::string&, const HostTensor& value) {
                  last = value.ToVector<float>();
                },
                Options()),
            0);
  EXPECT_EQ(last, (std::vector<float>{-2.0f, 1.5f}));
}

TEST(InferenceTest, AFeedNobodyPushesToTimesOutNamingTheOpTheFeedAndTheIteration) {
  const std::string feed = "inference_test.starved";
  StatusOr<Plan> plan = ScalePlan(feed, milliseconds(300));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string checkpoint = SaveWeights("starved");
  ASSERT_TRUE(HostFeed::Push(feed, Vector2(1, 1)).ok());
  int outputs = 0;
  testing::internal::CaptureStderr();
  const auto begin = std::chrono::steady_clock::now();
  const int code = RunInference(
      *plan, checkpoint, 3, [&](int64_t, const std::string&, const HostTensor&) { ++outputs; },
      Options());
  const auto elapsed = std::chrono::steady_clock::now() - begin;
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_EQ(outputs, 1);
  EXPECT_LT(elapsed, std::chrono::seconds(30));
  EXPECT_NE(err.find("inference_test: "), std::string::npos) << err;
  EXPECT_NE(err.find("op 'x' (host_feed) at iteration 1"), std::string::npos) << err;
  EXPECT_NE(err.find("host feed 'inference_test.starved'"), std::string::npos) << err;
  EXPECT_NE(err.find("300 ms"), std::string::npos) << err;
  EXPECT_EQ(HostFeed::Pending(feed), 0);
}

TEST(InferenceTest, APushOfAnotherShapeNamesTheOpTheFeedAndBothDescs) {
  const std::string feed = "inference_test.shape";
  StatusOr<Plan> plan = ScalePlan(feed, milliseconds(20000));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string checkpoint = SaveWeights("shape");
  ASSERT_TRUE(HostFeed::Push(feed, HostTensor::FromVector<float>(Shape{3}, {1, 2, 3})).ok());
  testing::internal::CaptureStderr();
  const int code = RunInference(*plan, checkpoint, 2, {}, Options());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("op 'x' (host_feed) at iteration 0"), std::string::npos) << err;
  EXPECT_NE(err.find("feed 'inference_test.shape' delivered float32(3,)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("the op takes float32(2,)"), std::string::npos) << err;

  // The dtype is checked too.
  ASSERT_TRUE(HostFeed::Push(feed, HostTensor::FromVector<double>(Shape{2}, {1, 2})).ok());
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunInference(*plan, checkpoint, 1, {}, Options()), 1);
  const std::string dtype_err = testing::internal::GetCapturedStderr();
  EXPECT_NE(dtype_err.find("delivered float64(2,)"), std::string::npos) << dtype_err;
}

TEST(InferenceTest, ClosingAFeedEndsAWaitAtOnce) {
  const std::string feed = "inference_test.closed";
  StatusOr<Plan> plan = ScalePlan(feed, milliseconds(60000));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string checkpoint = SaveWeights("closed");
  ASSERT_TRUE(HostFeed::Push(feed, Vector2(1, 1)).ok());
  testing::internal::CaptureStderr();
  const auto begin = std::chrono::steady_clock::now();
  const int code = RunInference(
      *plan, checkpoint, 3,
      [&](int64_t, const std::string&, const HostTensor&) { HostFeed::Close(feed); }, Options());
  const auto elapsed = std::chrono::steady_clock::now() - begin;
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_LT(elapsed, std::chrono::seconds(30));
  EXPECT_NE(err.find("host feed 'inference_test.closed' was closed"), std::string::npos) << err;
  // Reopened for the next run.
  EXPECT_TRUE(HostFeed::Push(feed, Vector2(1, 1)).ok());
  HostFeed::Reset(feed);
}

TEST(InferenceTest, BadInputIsExitTwoBeforeAnythingRuns) {
  const std::string feed = "inference_test.bad";
  StatusOr<Plan> plan = ScalePlan(feed, milliseconds(20000));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string checkpoint = SaveWeights("bad");
  ASSERT_TRUE(HostFeed::Push(feed, Vector2(1, 1)).ok());

  testing::internal::CaptureStderr();
  EXPECT_EQ(RunInference(*plan, checkpoint + "-missing", 1, {}, Options()), 2);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("bad-missing"), std::string::npos) << err;
  EXPECT_EQ(HostFeed::Pending(feed), 0);  // reset on every return

  testing::internal::CaptureStderr();
  EXPECT_EQ(RunInference(*plan, checkpoint, 0, {}, Options()), 2);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("iterations must be in [1, "), std::string::npos) << err;

  // A checkpoint whose w has another shape.
  const std::string wrong = std::string(std::getenv("TEST_TMPDIR")) + "/wrong";
  std::map<std::string, HostTensor> variables;
  variables.emplace("w", HostTensor::FromVector<float>(Shape{3}, {1, 2, 3}));
  ASSERT_TRUE(SaveVariables(wrong, 0, variables).ok());
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunInference(*plan, wrong, 1, {}, Options()), 2);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("'w'"), std::string::npos) << err;
}

TEST(InferenceTest, TrainingJobsAndPlansAreRefused) {
  Graph g("train", 1);
  Tensor x = HostInput(&g, "inference_test.train", Shape{2}, DT_FLOAT);
  Tensor w = g.Variable("w", Shape{2});
  g.Minimize(g.ReduceSum(g.Mul(x, w)), Sgd{.learning_rate = 0.1});
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> refused = CompileInferencePlan(*job);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("forward-only"), std::string::npos);

  StatusOr<Plan> training = CompileTrainingPlan(*job);
  ASSERT_TRUE(training.ok()) << training.status();
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunInference(*training, SaveWeights("train"), 1, {}, Options()), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not a training plan"), std::string::npos) << err;
}

TEST(InferenceTest, AHostInputOnSeveralDevicesIsRefusedNamingTheOp) {
  const std::string feed = "inference_test.devices";
  StatusOr<Plan> plan = ScalePlan(feed, milliseconds(20000), Shape{2}, "0:cpu:0-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  testing::internal::CaptureStderr();
  EXPECT_NE(RunInference(*plan, SaveWeights("devices"), 1, {}, Options()), 0);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("op 'x' (host_feed): feed 'inference_test.devices' runs on one device"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace driver
}  // namespace oflite
