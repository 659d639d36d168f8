// BatchNorm under data parallelism, through compiler + runtime: statistics
// are per device (docs/ops.md, batch_norm). A 2-device data-parallel run
// must equal, on one machine, the same model whose BatchNorm is applied to
// each device's half of the batch separately (shared gamma/beta, own
// running statistics): same losses every iteration, and device k's running
// statistics equal those of half k. One-device runs match
// the reference executor bit for bit, and the evaluation job switches
// batch_norm to its running statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/eval_job.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/reference/reference_executor.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

constexpr int64_t kBatch = 8;
constexpr int64_t kIterations = 6;

struct Parameters {
  Tensor w1, w2, gamma, beta;
};

// Created first, in the same order in both jobs, so both draw the same
// initial values (variable seeds come from creation order).
Parameters MakeParameters(Graph* g) {
  VariableOptions xavier;
  xavier.initializer = Initializer::XavierUniform();
  VariableOptions ones;
  ones.initializer = Initializer::Ones();
  return {g->Variable("w1", Shape{4, 6}, xavier), g->Variable("w2", Shape{6, 3}, xavier),
          g->Variable("gamma", Shape{6}, ones), g->Variable("beta", Shape{6})};
}

Tensor Linear(Graph* g, const Tensor& x, const Tensor& weight) {
  DenseOptions options;
  options.use_bias = false;
  options.weight = weight;
  return Dense(g, x, weight.shape().dim(1), options);
}

BatchNormOptions Shared(const Parameters& p, const std::string& name) {
  BatchNormOptions options;
  options.gamma = p.gamma;
  options.beta = p.beta;
  options.momentum = 0.7;
  options.name = name;
  return options;
}

// `halves`: BatchNorm on rows [0, 4) and [4, 8) separately (one device).
StatusOr<Job> BatchNormMlp(const std::string& placement, bool halves) {
  Graph g("bn_mlp", /*seed=*/5);
  g.SetPlacement(Placement::Parse(placement));
  Parameters p = MakeParameters(&g);
  Batch data = RandomBatch(&g, Shape{kBatch, 4}, 3);
  Tensor h = Linear(&g, data.image, p.w1);
  if (halves) {
    Tensor top = BatchNorm(&g, g.Slice(h, {0, 0}, {kBatch / 2, 6}, {1, 1}), Shared(p, "bn"));
    Tensor bottom =
        BatchNorm(&g, g.Slice(h, {kBatch / 2, 0}, {kBatch, 6}, {1, 1}), Shared(p, "bn1"));
    h = g.Concat({top, bottom}, 0);
  } else {
    h = BatchNorm(&g, h, Shared(p, "bn"));
  }
  Tensor logits = Linear(&g, g.Relu(h), p.w2);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Momentum{0.1, 0.9});
  g.SetIterations(kIterations);
  return g.Build();
}

// Keeps every device's part of every variable saved after the last
// iteration, by (variable, parallel id); restores nothing.
class PartRecorder : public VariableStore {
 public:
  StatusOr<bool> Restore(const VariablePart&, Blob*) override { return false; }
  Status Save(const VariablePart& part, int64_t completed, const Blob& blob) override {
    if (completed != kIterations) return Status::OK();
    std::lock_guard<std::mutex> lock(mutex_);
    const float* data = blob.data<float>();
    parts_[{part.op_name, part.parallel_id}] = std::vector<float>(data, data + blob.elem_count());
    return Status::OK();
  }
  std::map<std::pair<std::string, int64_t>, std::vector<float>> Parts() {
    std::lock_guard<std::mutex> lock(mutex_);
    return parts_;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, int64_t>, std::vector<float>> parts_;
};

struct RunResult {
  std::map<int64_t, double> losses;
  std::map<std::pair<std::string, int64_t>, std::vector<float>> parts;  // (variable, device)
};

StatusOr<RunResult> RunOnRuntime(const Job& job, int cpus) {
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, compiler::MakeCluster(1, cpus)));
  testing::MetricsRecorder recorder;
  PartRecorder store;
  RuntimeOptions options;
  options.metrics = &recorder;
  options.variables = &store;
  options.save_every = kIterations;
  options.watchdog_timeout = std::chrono::milliseconds(20000);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  return RunResult{recorder.Values("loss"), store.Parts()};
}

std::vector<float> ToFloats(const HostTensor& t) {
  std::vector<float> v(t.elem_count());
  for (int64_t i = 0; i < t.elem_count(); ++i) v[i] = t.data<float>()[i];
  return v;
}

TEST(BatchNormParallelTest, DataParallelEqualsPerHalfStatisticsOnOneMachine) {
  StatusOr<Job> parallel = BatchNormMlp("0:cpu:0-1", /*halves=*/false);
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  StatusOr<Job> halves = BatchNormMlp("0:cpu:0", /*halves=*/true);
  ASSERT_TRUE(halves.ok()) << halves.status();
  StatusOr<ReferenceTrainResult> reference = TrainReference(*halves, kIterations);
  ASSERT_TRUE(reference.ok()) << reference.status();
  StatusOr<RunResult> run = RunOnRuntime(*parallel, 2);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->losses.size(), static_cast<size_t>(kIterations));
  for (int64_t i = 0; i < kIterations; ++i) {
    const double want = reference->losses[i];
    EXPECT_LE(std::abs(run->losses[i] - want), 1e-5 * std::abs(want)) << "iteration " << i;
  }
  // The whole-batch statistics differ from the per-half ones: the one-device
  // run of the same model gives other losses (so the check above can fail).
  StatusOr<Job> whole = BatchNormMlp("0:cpu:0", /*halves=*/false);
  ASSERT_TRUE(whole.ok()) << whole.status();
  StatusOr<ReferenceTrainResult> global = TrainReference(*whole, kIterations);
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_GT(std::abs(global->losses[1] - reference->losses[1]), 1e-4);
  // Device k's running statistics are those of half k ("bn" / "bn1").
  for (const char* stat : {"moving_mean", "moving_variance"}) {
    for (int64_t device : {0, 1}) {
      const std::string name = std::string("bn-") + stat;
      auto saved = run->parts.find({name, device});
      ASSERT_NE(saved, run->parts.end()) << name << " on device " << device;
      const std::vector<float> want =
          ToFloats(reference->variables.at((device == 0 ? "bn-" : "bn1-") + std::string(stat)));
      ASSERT_EQ(saved->second.size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_NEAR(saved->second[k], want[k], 1e-5 * (1 + std::abs(want[k])))
            << name << " device " << device << " element " << k;
      }
    }
  }
}

TEST(BatchNormParallelTest, OneDeviceRuntimeMatchesTheReferenceExecutorBitwise) {
  StatusOr<Job> job = BatchNormMlp("0:cpu:0", /*halves=*/false);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<ReferenceTrainResult> reference = TrainReference(*job, kIterations);
  ASSERT_TRUE(reference.ok()) << reference.status();
  StatusOr<RunResult> run = RunOnRuntime(*job, 1);
  ASSERT_TRUE(run.ok()) << run.status();
  for (int64_t i = 0; i < kIterations; ++i) {
    EXPECT_EQ(run->losses[i], reference->losses[i]) << "iteration " << i;
  }
  for (const char* stat : {"bn-moving_mean", "bn-moving_variance"}) {
    auto saved = run->parts.find({stat, 0});
    ASSERT_NE(saved, run->parts.end()) << stat;
    EXPECT_EQ(saved->second, ToFloats(reference->variables.at(stat))) << stat;
    // Training moved them off their initial zeros / ones.
    const float initial = std::string(stat) == "bn-moving_mean" ? 0.f : 1.f;
    EXPECT_NE(saved->second, std::vector<float>(6, initial)) << stat;
  }
}

TEST(BatchNormParallelTest, TheEvaluationJobUsesRunningStatistics) {
  StatusOr<Job> job = BatchNormMlp("0:cpu:0-1", /*halves=*/false);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Job> eval = MakeEvalJob(*job);
  ASSERT_TRUE(eval.ok()) << eval.status();
  int found = 0;
  for (const OpConf& op : eval->op()) {
    if (op.op_type() != "batch_norm") continue;
    ++found;
    EXPECT_FALSE(AttrView(op).GetBoolOr("training", true)) << op.name();
  }
  EXPECT_EQ(found, 1);
  StatusOr<Plan> plan = compiler::Compile(*eval, compiler::MakeCluster(1, 2));
  EXPECT_TRUE(plan.ok()) << plan.status();
}

}  // namespace
}  // namespace oflite
