// Two machines of a compiled data-parallel or pipeline plan in one process: two Runtime
// objects, each with its own MultiMachineSession over the ibverbs provider on
// one emulated fabric, equal the same plan's parallelism on one machine.
#include "oneflow_lite/runtime/commnet/multi_machine.h"

#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/ibverbs/emulated_transport.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/compiler/test_jobs.h"

namespace oflite {
namespace {

using std::chrono::milliseconds;

class Recorder : public MetricsObserver {
 public:
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, value] : metrics) {
      if (name == "loss") loss_[iteration] = value;
    }
  }
  std::map<int64_t, double> loss() {
    std::lock_guard<std::mutex> lock(mutex_);
    return loss_;
  }

 private:
  std::mutex mutex_;
  std::map<int64_t, double> loss_;
};

compiler::MlpSpec Spec(const std::string& placement, std::vector<std::string> stages = {}) {
  compiler::MlpSpec spec;
  spec.batch = 16;
  spec.features = 24;
  spec.hidden = {12};
  spec.classes = 4;
  spec.placement = placement;
  spec.iterations = 8;
  spec.stages = std::move(stages);
  return spec;
}

Status RunRank(const Plan& plan, int rank, const std::string& master,
               comm::ProviderFactory provider, Recorder* recorder) {
  MultiMachineOptions multi;
  multi.rank = rank;
  multi.master = master;
  multi.provider = std::move(provider);
  multi.provider_name = "ibverbs-emulated";
  multi.connect_timeout = milliseconds(20000);
  ASSIGN_OR_RETURN(std::unique_ptr<MultiMachineSession> session,
                   MultiMachineSession::Start(plan, multi));
  RuntimeOptions options;
  options.machine_id = rank;
  options.metrics = recorder;
  options.watchdog_timeout = milliseconds(20000);
  session->Configure(&options);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(session->AfterCreate(runtime.get()));
  Status run = runtime->Run();
  if (run.ok()) run = session->Finish();
  session->Detach();
  runtime.reset();
  return run;
}

// Runs `one_spec` on one machine with 2 CPUs and `two_spec` on two machines
// with one CPU each (ibverbs over the emulator); the loss curves must match.
void ExpectSameLoss(const compiler::MlpSpec& one_spec, const compiler::MlpSpec& two_spec) {
  StatusOr<Job> one_job = compiler::BuildMlpJob(one_spec);
  ASSERT_TRUE(one_job.ok()) << one_job.status().ToString();
  StatusOr<Plan> one = compiler::Compile(*one_job, compiler::MakeCluster(1, 2));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  Recorder reference;
  {
    RuntimeOptions options;
    options.metrics = &reference;
    StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(*one, options);
    ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
    ASSERT_TRUE((*runtime)->Run().ok());
  }

  StatusOr<Job> two_job = compiler::BuildMlpJob(two_spec);
  ASSERT_TRUE(two_job.ok());
  StatusOr<Plan> two = compiler::Compile(*two_job, compiler::MakeCluster(2, 1));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  int port = 0;
  auto fd = comm::ListenTcp("127.0.0.1", &port);
  ASSERT_TRUE(fd.ok());
  ::close(*fd);
  const std::string master = "127.0.0.1:" + std::to_string(port);
  setenv("OFLITE_JOB_TOKEN", "multi-machine-test", 1);
  comm::ibverbs::TransportCreator creator = comm::ibverbs::EmulatedIbverbsCreator();
  Recorder recorders[2];
  Status results[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      results[rank] = RunRank(*two, rank, master, creator, &recorders[rank]);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(results[0].ok()) << results[0].ToString();
  ASSERT_TRUE(results[1].ok()) << results[1].ToString();

  std::map<int64_t, double> want = reference.loss();
  std::map<int64_t, double> got = recorders[0].loss();
  for (const auto& [iteration, value] : recorders[1].loss()) got[iteration] = value;
  ASSERT_EQ(want.size(), 8u);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [iteration, value] : want) {
    EXPECT_NEAR(got[iteration], value, 1e-5 * std::fabs(value)) << "iteration " << iteration;
  }
}

TEST(MultiMachineTest, DataParallelOverEmulatedIbverbsEqualsOneMachine) {
  ExpectSameLoss(Spec("0:cpu:0-1"), Spec("0-1:cpu:0"));
}

// The pipeline's cross-machine registers are pulled by one-sided READs.
TEST(MultiMachineTest, PipelineOverEmulatedIbverbsEqualsOneMachine) {
  ExpectSameLoss(Spec("0:cpu:0", {"0:cpu:0", "0:cpu:1"}), Spec("0:cpu:0", {"0:cpu:0", "1:cpu:0"}));
}

// Model parallel: the boxing between split and partial layers crosses
// machines (ring collectives or, where the ring does not apply, the
// every-part-to-every-rank fallback).
TEST(MultiMachineTest, ModelParallelSplitRowsEqualsOneMachine) {
  compiler::MlpSpec one = Spec("0:cpu:0-1");
  compiler::MlpSpec two = Spec("0-1:cpu:0");
  one.model_parallel = two.model_parallel = compiler::ModelParallel::kSplitRows;
  ExpectSameLoss(one, two);
}

TEST(MultiMachineTest, ModelParallelSplitColumnsEqualsOneMachine) {
  compiler::MlpSpec one = Spec("0:cpu:0-1");
  compiler::MlpSpec two = Spec("0-1:cpu:0");
  one.model_parallel = two.model_parallel = compiler::ModelParallel::kSplitColumns;
  ExpectSameLoss(one, two);
}

}  // namespace
}  // namespace oflite
