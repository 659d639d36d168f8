// End-to-end training through compiler + runtime: Fashion-MNIST against the
// reference executor, resume from a checkpoint, and failures that must stop
// the run with a message naming the op and iteration.
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/reference/reference_executor.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/runtime/variable_stores.h"

namespace oflite {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

using Recorder = testing::MetricsRecorder;

StatusOr<Job> FashionMlp(const std::string& placement, int64_t iterations) {
  Graph g("fashion_mlp", /*seed=*/3);
  g.SetPlacement(Placement::Parse(placement));
  FashionMnistOptions data_options;
  data_options.flatten = true;
  Batch data = FashionMnist(&g, kFashionMnist, 32, Split(0), data_options);
  Tensor logits = Dense(&g, g.Relu(Dense(&g, data.image, 32)), 10);
  Tensor loss = g.SparseSoftmaxCrossEntropy(logits, data.label);
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  g.Minimize(loss, Momentum{0.05, 0.9});
  g.SetIterations(iterations);
  return g.Build();
}

Status RunJob(const Job& job, RuntimeOptions options, int cpus = 2) {
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, compiler::MakeCluster(1, cpus)));
  options.watchdog_timeout = std::chrono::milliseconds(20000);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  return runtime->Run();
}

TEST(TrainingTest, FashionMnistMatchesTheReferenceExecutor) {
  for (const char* placement : {"0:cpu:0", "0:cpu:0-1"}) {
    StatusOr<Job> job = FashionMlp(placement, 20);
    ASSERT_TRUE(job.ok()) << job.status();
    // The runtime sizes the BLAS and oneDNN thread teams (the cores divided
    // among the cluster's 2 CPU devices, Runtime::Create); oneDNN may cut a
    // GEMM's reduction by team size (it does with AVX2 kernels), so the
    // reference runs with the same teams, not the libraries' defaults.
    StatusOr<int> threads = ResolveCpuThreads(0, 2, AvailableCpuCores(), "test");
    ASSERT_TRUE(threads.ok()) << threads.status();
    SetCpuComputeThreads(*threads);
    StatusOr<ReferenceTrainResult> reference = TrainReference(*job, 20);
    ASSERT_TRUE(reference.ok()) << reference.status();
    Recorder recorder;
    RuntimeOptions options;
    options.metrics = &recorder;
    Status status = RunJob(*job, options);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(recorder.values["loss"].size(), 20u);
    const bool bitwise = std::string(placement) == "0:cpu:0";
    for (int64_t i = 0; i < 20; ++i) {
      const double want = reference->losses[i];
      const double got = recorder.values["loss"][i];
      if (bitwise) {
        EXPECT_EQ(got, want) << placement << " iteration " << i;
      } else {
        EXPECT_LE(std::abs(got - want), 1e-5 * std::abs(want)) << placement << " iteration " << i;
      }
    }
  }
}

// LeNet-5 (the benches' network: 6/16 5x5 convolutions, pooling, 120-84-10,
// momentum SGD) on learnable synthetic data, data parallel over 2 CPU devices
// of one process against 1 device: the same losses at every iteration (the
// 2-device gradient is the sum of two half-batch gradients, so only the
// summation order differs). Few iterations: at this learning rate a 1e-7
// difference grows about 3x per step (measured at batch 64: 1e-7 at step 8,
// 1e-3 by step 22), so long runs of the two diverge without any defect.
StatusOr<Job> Lenet5(const std::string& placement, int64_t iterations) {
  Graph g("lenet5_dp", /*seed=*/1);
  g.SetPlacement(Placement::Parse(placement));
  Batch data = RandomBatch(&g, Shape{16, 1, 28, 28}, 10);
  auto conv_relu_pool = [&g](const Tensor& x, int64_t filters, int64_t pad) {
    Conv2dOptions options;
    options.padding = {pad, pad};
    return MaxPool2d(&g, g.Relu(Conv2d(&g, x, filters, 5, options)), 2);
  };
  Tensor x = conv_relu_pool(data.image, 6, 2);  // [B, 6, 14, 14]
  x = conv_relu_pool(x, 16, 0);                 // [B, 16, 5, 5]
  x = g.Relu(Dense(&g, x, 120));
  x = g.Relu(Dense(&g, x, 84));
  g.Minimize(g.SparseSoftmaxCrossEntropy(Dense(&g, x, 10), data.label),
             Momentum{.learning_rate = 0.05, .momentum = 0.9});
  g.SetIterations(iterations);
  return g.Build();
}

TEST(TrainingTest, Lenet5OnTwoDevicesTrainsLikeOneDevice) {
  constexpr int64_t kIters = 12;
  std::map<int, std::map<int64_t, double>> losses;  // devices -> iteration -> loss
  for (int devices : {1, 2}) {
    StatusOr<Job> job = Lenet5(devices == 1 ? "0:cpu:0" : "0:cpu:0-1", kIters);
    ASSERT_TRUE(job.ok()) << job.status();
    Recorder recorder;
    RuntimeOptions options;
    options.metrics = &recorder;
    Status ran = RunJob(*job, options, devices);
    ASSERT_TRUE(ran.ok()) << devices << " device(s): " << ran;
    losses[devices] = recorder.Values("loss");
    ASSERT_EQ(losses[devices].size(), static_cast<size_t>(kIters)) << devices << " device(s)";
  }
  for (int64_t it = 0; it < kIters; ++it) {
    const double one = losses[1][it], two = losses[2][it];
    ASSERT_TRUE(std::isfinite(one) && std::isfinite(two)) << "iteration " << it;
    EXPECT_NEAR(two, one, 1e-4 * std::max(1.0, std::fabs(one)))
        << "iteration " << it << ": 2 devices " << two << ", 1 device " << one;
  }
}

TEST(TrainingTest, ResumedRunContinuesTheSameLossCurve) {
  StatusOr<Job> job = FashionMlp("0:cpu:0-1", 16);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(1, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  StatusOr<std::map<std::string, TensorDesc>> variables = PlanVariables(*plan);
  ASSERT_TRUE(variables.ok()) << variables.status();
  const std::string root = std::string(std::getenv("TEST_TMPDIR")) + "/resume";

  CheckpointVariableStore::Options save_options;
  save_options.save_root = root;
  save_options.final_iteration = 16;
  save_options.variables = *variables;
  CheckpointVariableStore saver(save_options);
  Recorder full;
  RuntimeOptions options;
  options.metrics = &full;
  options.variables = &saver;
  options.save_every = 8;
  auto runtime = Runtime::Create(*plan, options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ASSERT_TRUE((*runtime)->Run().ok());

  CheckpointVariableStore::Options restore_options = save_options;
  restore_options.save_root = "";
  restore_options.restore_dir = ShardedCheckpointStore::CheckpointDir(root, 8);
  CheckpointVariableStore restorer(restore_options);
  Recorder resumed;
  options.metrics = &resumed;
  options.variables = &restorer;
  options.save_every = 0;
  options.start_iter = 8;
  auto second = Runtime::Create(*plan, options);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE((*second)->Run().ok());
  ASSERT_EQ(resumed.values["loss"].size(), 8u);
  for (int64_t i = 8; i < 16; ++i) {
    EXPECT_EQ(resumed.values["loss"][i], full.values["loss"][i]) << "iteration " << i;
  }
}

TEST(TrainingTest, BadEmbeddingIndexStopsTheRunNamingOpAndIteration) {
  // Labels in [0, 10) index a 4-row table: some row is out of range.
  Graph g("bad_index", /*seed=*/1);
  g.SetPlacement(Placement::Parse("0:cpu:0-1"));
  Batch data = RandomBatch(&g, Shape{8, 3}, 10);
  Tensor embedded = Embedding(&g, data.label, 4, 3);
  g.AddMetric("loss", g.ReduceMean(embedded));
  g.SetIterations(50);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  Status status = RunJob(*job, RuntimeOptions{});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("embedding"), std::string::npos) << status;
  EXPECT_NE(status.message().find("iteration 0"), std::string::npos) << status;
}

TEST(TrainingTest, NanCheckNamesTheFirstOpProducingNan) {
  // A learning rate this large overflows to Inf/NaN within a few steps.
  compiler::MlpSpec spec;
  spec.iterations = 200;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  for (OpConf& op : *job->mutable_op()) {
    for (AttrEntry& attr : *op.mutable_attr()) {
      if (attr.key() == "base_lr") attr.mutable_value()->set_f(1e30);
    }
  }
  RuntimeOptions options;
  options.check_nan = true;
  Status status = RunJob(*job, options);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("NaN/Inf"), std::string::npos) << status;
  EXPECT_NE(status.message().find("at iteration"), std::string::npos) << status;
}

}  // namespace
}  // namespace oflite
