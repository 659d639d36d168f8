// Sharded optimizer states (ZeRO, api/shard_optimizer.h) train exactly like
// one device without them, in one process (1 machine x 2 and x 4 CPU
// devices: the reduce-scatters and all-gathers run as boxing tasks): the
// MLP with Adam, and with AdamW + global-norm clipping + weight decay on
// matrices + a cosine schedule, where over 4 devices one bias is too small
// to split (the norm then has a sharded and a whole part) and another
// splits in slices of unequal size. Loss within 1e-5 relative at every one
// of 20 iterations. The multi-process runs are tests/zero_test.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <mutex>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/shard_optimizer.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

constexpr int64_t kIterations = 20;

class LossRecorder : public MetricsObserver {
 public:
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, value] : metrics) {
      if (name == "loss") losses_[iteration] = value;
    }
  }
  std::map<int64_t, double> losses() {
    std::lock_guard<std::mutex> lock(mutex_);
    return losses_;
  }

 private:
  std::mutex mutex_;
  std::map<int64_t, double> losses_;
};

// 16 -> 32 -> 4, Adam 0.005: the loss stays far from 0 over the 20
// iterations, so relative differences mean something.
StatusOr<Job> AdamMlp(const std::string& placement) {
  Graph g("zero_adam", /*seed=*/7);
  Batch data = RandomBatch(&g, Shape{16, 16}, 4);
  Tensor logits = Dense(&g, g.Relu(Dense(&g, data.image, 32)), 4);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Adam{.learning_rate = 0.005});
  g.SetIterations(kIterations);
  g.SetPlacement(Placement::Parse(placement));
  return g.Build();
}

// 16 -> 30 -> 3, AdamW, cosine schedule, clipping at 0.5 (it clips).
StatusOr<Job> ClippedMlp(const std::string& placement) {
  Graph g("zero", /*seed=*/5);
  Batch data = RandomBatch(&g, Shape{8, 16}, 3);
  Tensor logits = Dense(&g, g.Relu(Dense(&g, data.image, 30)), 3);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label),
             AdamW{.learning_rate = 0.02, .weight_decay = 0.1},
             MinimizeOptions{.schedule = LrScheduleOptions::Cosine(3),
                             .clip_global_norm = 0.5,
                             .weight_decay_min_rank = 2});
  g.SetIterations(kIterations);
  g.SetPlacement(Placement::Parse(placement));
  return g.Build();
}

StatusOr<std::map<int64_t, double>> Train(const Job& job, int64_t devices) {
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, compiler::MakeCluster(1, devices)));
  LossRecorder recorder;
  RuntimeOptions options;
  options.metrics = &recorder;
  options.watchdog_timeout = std::chrono::milliseconds(60000);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  return recorder.losses();
}

using JobFn = StatusOr<Job> (*)(const std::string& placement);

void ExpectShardedEqualsOneDevice(JobFn make_job, bool same_as_data_parallel) {
  StatusOr<Job> one = make_job("0:cpu:0");
  ASSERT_TRUE(one.ok()) << one.status();
  StatusOr<std::map<int64_t, double>> want = Train(*one, 1);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), static_cast<size_t>(kIterations));
  EXPECT_LT(want->rbegin()->second, want->begin()->second);  // it trains
  for (int64_t devices : {2, 4}) {
    StatusOr<Job> job = make_job("0:cpu:0-" + std::to_string(devices - 1));
    ASSERT_TRUE(job.ok()) << job.status();
    StatusOr<Job> sharded = ShardOptimizerStates(*job);
    ASSERT_TRUE(sharded.ok()) << sharded.status();
    StatusOr<std::map<int64_t, double>> got = Train(*sharded, devices);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want->size()) << devices << " devices";
    double worst = 0;
    for (const auto& [iteration, value] : *want) {
      worst = std::max(worst, std::fabs(got->at(iteration) - value) / std::fabs(value));
    }
    EXPECT_LE(worst, 1e-5) << devices << " devices";
    if (same_as_data_parallel) {
      // Reduce-scatter then update on slices adds and rounds exactly as
      // all-reduce then update on the whole: the same bits as data
      // parallelism without sharding.
      StatusOr<std::map<int64_t, double>> plain = Train(*job, devices);
      ASSERT_TRUE(plain.ok()) << plain.status();
      EXPECT_EQ(*plain, *got) << devices << " devices";
    }
    std::printf("%lld devices: largest relative loss difference %.2e\n",
                static_cast<long long>(devices), worst);
  }
}

TEST(ZeroTrainTest, AdamMlpOverTwoAndFourDevicesEqualsOneDevice) {
  ExpectShardedEqualsOneDevice(AdamMlp, /*same_as_data_parallel=*/true);
}

TEST(ZeroTrainTest, ClippingWeightDecayAndScheduleOverTwoAndFourDevicesEqualOneDevice) {
  // The norm's squares are summed per device, then across: not the same
  // bits as one sum, but within the bound.
  ExpectShardedEqualsOneDevice(ClippedMlp, /*same_as_data_parallel=*/false);
}

}  // namespace
}  // namespace oflite
