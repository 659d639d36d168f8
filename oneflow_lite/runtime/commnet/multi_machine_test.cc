// Two machines of a compiled data-parallel or pipeline plan in one process: two Runtime
// objects, each with its own MultiMachineSession over the ibverbs provider on
// one emulated fabric, equal the same plan's parallelism on one machine; a
// second run on the same sessions (BeginRun) equals it again, plans that
// differ between ranks are refused, and GatherToRoot brings every rank's
// value to rank 0.
#include "oneflow_lite/runtime/commnet/multi_machine.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/ibverbs/emulated_transport.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"

namespace oflite {
namespace {

using std::chrono::milliseconds;

using Recorder = testing::MetricsRecorder;

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

StatusOr<std::unique_ptr<MultiMachineSession>> StartRank(const Plan& plan, int rank,
                                                         const std::string& master,
                                                         comm::ProviderFactory provider) {
  MultiMachineOptions multi;
  multi.rank = rank;
  multi.master = master;
  multi.provider = std::move(provider);
  multi.provider_name = "ibverbs-emulated";
  multi.job_token = "multi-machine-test";
  multi.connect_timeout = milliseconds(20000);
  return MultiMachineSession::Start(plan, multi);
}

// One run of `plan` on `session` (Configure .. Finish, Detach).
Status RunOnce(MultiMachineSession* session, const Plan& plan, int rank, Recorder* recorder) {
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

// `plan` once, or (with `second`) twice on the same session: the second
// run through BeginRun, recorded in `second`, after which every rank's
// count of recorded losses is gathered at rank 0 into `gathered`.
Status RunRank(const Plan& plan, int rank, const std::string& master,
               comm::ProviderFactory provider, Recorder* recorder, Recorder* second = nullptr,
               std::vector<std::string>* gathered = nullptr) {
  ASSIGN_OR_RETURN(std::unique_ptr<MultiMachineSession> session,
                   StartRank(plan, rank, master, std::move(provider)));
  RETURN_IF_ERROR(RunOnce(session.get(), plan, rank, recorder));
  if (second == nullptr) return Status::OK();
  RETURN_IF_ERROR(session->BeginRun(plan, "again"));
  // The second run's runtime (same register descs) must not see the first
  // run's zero-copy keys or barriers.
  Status run = RunOnce(session.get(), plan, rank, second);
  if (!run.ok()) return run;
  ASSIGN_OR_RETURN(*gathered, session->GatherToRoot(
                                  "losses", std::to_string(second->Values("loss").size())));
  return session->Finish();
}

std::string FreeMaster() {
  int port = 0;
  auto fd = comm::ListenTcp("127.0.0.1", &port);
  if (!fd.ok()) return "";
  ::close(*fd);
  return "127.0.0.1:" + std::to_string(port);
}

void ExpectLossEq(std::map<int64_t, double> want, std::map<int64_t, double> got) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [iteration, value] : want) {
    EXPECT_NEAR(got[iteration], value, 1e-5 * std::fabs(value)) << "iteration " << iteration;
  }
}

// Runs `one_spec` on one machine with 2 CPUs and `two_spec` on two machines
// with one CPU each (ibverbs over the emulator); the loss curves must match.
// Every static zero-copy register of `plan` moved to bounce buffers (the
// strategy of dynamic-shape registers).
void UseBounceBuffers(Plan* plan) {
  auto change = [](RegstDescProto* desc) {
    if (desc->cross_machine_strategy() == CM_STATIC_ZERO_COPY) {
      desc->set_cross_machine_strategy(CM_BOUNCE_BUFFER);
    }
  };
  for (MachinePlan& machine : *plan->mutable_machine()) {
    for (TaskProto& task : *machine.mutable_task()) {
      for (RegstDescProto& desc : *task.mutable_produced()) change(&desc);
      if (task.type() == TASK_COMMNET) change(task.mutable_commnet()->mutable_src_regst());
    }
  }
}

// `machines` ranks (2 unless said): one machine with that many CPUs against
// that many machines of one CPU each.
void ExpectSameLoss(const compiler::MlpSpec& one_spec, const compiler::MlpSpec& two_spec,
                    bool twice = false, bool bounce = false, int machines = 2) {
  ASSERT_TRUE(machines == 2 || !twice) << "the second run's checks count 2 ranks";
  StatusOr<Job> one_job = compiler::BuildMlpJob(one_spec);
  ASSERT_TRUE(one_job.ok()) << one_job.status().ToString();
  StatusOr<Plan> one = compiler::Compile(*one_job, compiler::MakeCluster(1, machines));
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
  StatusOr<Plan> two = compiler::Compile(*two_job, compiler::MakeCluster(machines, 1));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  if (bounce) UseBounceBuffers(&*two);
  const std::string master = FreeMaster();
  ASSERT_FALSE(master.empty());
  comm::ibverbs::TransportCreator creator = comm::ibverbs::EmulatedIbverbsCreator();
  std::vector<Recorder> recorders(machines), seconds(machines);
  std::vector<std::vector<std::string>> gathered(machines);
  std::vector<Status> results(machines);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < machines; ++rank) {
    threads.emplace_back([&, rank] {
      results[rank] = RunRank(*two, rank, master, creator, &recorders[rank],
                              twice ? &seconds[rank] : nullptr, &gathered[rank]);
      // A failed rank's session goes, which fails the other rank's
      // session (peer loss): say why first.
      if (!results[rank].ok()) {
        std::fprintf(stderr, "rank %d failed: %s\n", rank, results[rank].ToString().c_str());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < machines; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << "rank " << rank << ": " << results[rank].ToString();
  }

  std::map<int64_t, double> want = reference.Values("loss");
  ASSERT_EQ(want.size(), 8u);
  std::map<int64_t, double> got;
  for (int rank = 0; rank < machines; ++rank) {
    for (const auto& [iteration, value] : recorders[rank].Values("loss")) got[iteration] = value;
  }
  ExpectLossEq(want, got);
  if (!twice) return;
  std::map<int64_t, double> again = seconds[0].Values("loss");
  for (const auto& [iteration, value] : seconds[1].Values("loss")) again[iteration] = value;
  ExpectLossEq(want, again);
  // Rank 0 gathered each rank's count of second-run losses (the sink is on
  // one machine: 8 and 0 in some order); the other rank gets nothing.
  ASSERT_EQ(gathered[0].size(), 2u);
  EXPECT_EQ(std::stoi(gathered[0][0]) + std::stoi(gathered[0][1]), 8);
  EXPECT_EQ(std::to_string(seconds[0].Values("loss").size()), gathered[0][0]);
  EXPECT_EQ(std::to_string(seconds[1].Values("loss").size()), gathered[0][1]);
  EXPECT_TRUE(gathered[1].empty());
}

TEST(MultiMachineTest, DataParallelOverEmulatedIbverbsEqualsOneMachine) {
  ExpectSameLoss(Spec("0:cpu:0-1"), Spec("0-1:cpu:0"));
}

// Two runs on one session (as `oflite run` trains, then evaluates): ring
// collectives and zero-copy registers are set up afresh for the second.
TEST(MultiMachineTest, SecondRunOnTheSameSessionDataParallel) {
  ExpectSameLoss(Spec("0:cpu:0-1"), Spec("0-1:cpu:0"), /*twice=*/true);
}

TEST(MultiMachineTest, SecondRunOnTheSameSessionPipeline) {
  ExpectSameLoss(Spec("0:cpu:0", {"0:cpu:0", "0:cpu:1"}), Spec("0:cpu:0", {"0:cpu:0", "1:cpu:0"}),
                 /*twice=*/true);
}

TEST(MultiMachineTest, PipelineOverBounceBuffersEqualsOneMachine) {
  ExpectSameLoss(Spec("0:cpu:0", {"0:cpu:0", "0:cpu:1"}), Spec("0:cpu:0", {"0:cpu:0", "1:cpu:0"}),
                 /*twice=*/false, /*bounce=*/true);
}

// The second run's bounce streams replace the first run's on the router.
TEST(MultiMachineTest, SecondRunOnTheSameSessionBounceBuffers) {
  ExpectSameLoss(Spec("0:cpu:0", {"0:cpu:0", "0:cpu:1"}), Spec("0:cpu:0", {"0:cpu:0", "1:cpu:0"}),
                 /*twice=*/true, /*bounce=*/true);
}

// BeginRun before Finish is refused; a rank whose next plan differs from
// rank 0's is refused naming it (both ranks then finish cleanly).
TEST(MultiMachineTest, BeginRunChecksOrderAndPlanAgreement) {
  StatusOr<Job> job = compiler::BuildMlpJob(Spec("0-1:cpu:0"));
  ASSERT_TRUE(job.ok());
  StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(2, 1));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  compiler::MlpSpec other_spec = Spec("0-1:cpu:0");
  other_spec.iterations = 9;
  StatusOr<Job> other_job = compiler::BuildMlpJob(other_spec);
  ASSERT_TRUE(other_job.ok());
  StatusOr<Plan> other = compiler::Compile(*other_job, compiler::MakeCluster(2, 1));
  ASSERT_TRUE(other.ok());
  const std::string master = FreeMaster();
  ASSERT_FALSE(master.empty());
  comm::ibverbs::TransportCreator creator = comm::ibverbs::EmulatedIbverbsCreator();
  Status early[2], begun[2], finished[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      StatusOr<std::unique_ptr<MultiMachineSession>> session =
          StartRank(*plan, rank, master, creator);
      if (!session.ok()) {
        early[rank] = session.status();
        return;
      }
      early[rank] = (*session)->BeginRun(*plan, "too-early");
      if ((*session)->Finish().ok()) {
        begun[rank] = (*session)->BeginRun(rank == 0 ? *plan : *other, "next");
        finished[rank] = (*session)->Finish();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(early[rank].code(), StatusCode::kFailedPrecondition) << early[rank].ToString();
    EXPECT_TRUE(finished[rank].ok()) << finished[rank].ToString();
  }
  EXPECT_TRUE(begun[0].ok()) << begun[0].ToString();
  EXPECT_EQ(begun[1].code(), StatusCode::kFailedPrecondition) << begun[1].ToString();
  EXPECT_NE(begun[1].ToString().find("rank 1"), std::string::npos) << begun[1].ToString();
  EXPECT_NE(begun[1].ToString().find("rank 0's"), std::string::npos) << begun[1].ToString();
}

// Two tcp sessions of a 2-machine plan; rank 0 records what its on_fatal
// hears (the library itself never ends the process).
struct FatalRecorder {
  std::mutex mutex;
  std::condition_variable called;
  int calls = 0;
  JobFailure heard;

  // on_fatal runs on the session's own thread: a call that failed with the
  // cause may return a moment before it (bounded wait).
  bool WaitForCall(std::unique_lock<std::mutex>* lock) {
    return called.wait_for(*lock, std::chrono::seconds(30), [this] { return calls > 0; });
  }
};

StatusOr<std::unique_ptr<MultiMachineSession>> StartTcpRank(const Plan& plan, int rank,
                                                            const std::string& master,
                                                            FatalRecorder* recorder) {
  MultiMachineOptions multi;
  multi.rank = rank;
  multi.master = master;
  multi.job_token = "multi-machine-test";
  multi.connect_timeout = milliseconds(120000);  // a barrier waited out would show
  multi.peer_timeout = milliseconds(2000);
  if (recorder != nullptr) {
    multi.on_fatal = [recorder](const JobFailure& failure) {
      std::lock_guard<std::mutex> lock(recorder->mutex);
      ++recorder->calls;
      recorder->heard = failure;
      recorder->called.notify_all();
    };
  }
  return MultiMachineSession::Start(plan, multi);
}

void StartBoth(const Plan& plan, FatalRecorder* recorder,
               std::unique_ptr<MultiMachineSession> sessions[2]) {
  const std::string master = FreeMaster();
  ASSERT_FALSE(master.empty());
  StatusOr<std::unique_ptr<MultiMachineSession>> started[2] = {InternalError("not started"),
                                                               InternalError("not started")};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      started[rank] = StartTcpRank(plan, rank, master, rank == 0 ? recorder : nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(started[rank].ok()) << started[rank].status();
    sessions[rank] = std::move(*started[rank]);
  }
}

// Both ranks of a 2-machine data-parallel MLP plan, started over tcp
// (rank 0 reports to `recorder`).
void StartDataParallelPair(FatalRecorder* recorder,
                           std::unique_ptr<MultiMachineSession> sessions[2]) {
  StatusOr<Job> job = compiler::BuildMlpJob(Spec("0-1:cpu:0"));
  ASSERT_TRUE(job.ok());
  StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(2, 1));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  StartBoth(*plan, recorder, sessions);
}

// Peer loss stays armed while a rank waits at its last Finish barrier: the
// wait ends at once with "lost rank 1" (not at the barrier's deadline, nor
// with the master's view), on_fatal hears rank 1 once, and failure() keeps it.
TEST(MultiMachineTest, PeerLostDuringTheFinishBarrierEndsTheWaitNamingIt) {
  FatalRecorder recorder;
  std::unique_ptr<MultiMachineSession> sessions[2];
  StartDataParallelPair(&recorder, sessions);
  ASSERT_TRUE(sessions[0] && sessions[1]);
  std::thread crash([&] {
    std::this_thread::sleep_for(milliseconds(300));
    sessions[1].reset();  // rank 1 goes without finishing: its connections close
  });
  const Status finished = sessions[0]->Finish();
  crash.join();
  EXPECT_FALSE(finished.ok());
  EXPECT_NE(finished.message().find("lost rank 1"), std::string::npos) << finished;
  std::unique_lock<std::mutex> lock(recorder.mutex);
  EXPECT_TRUE(recorder.WaitForCall(&lock));
  EXPECT_EQ(recorder.calls, 1);
  EXPECT_EQ(recorder.heard.rank, 1);
  EXPECT_EQ(sessions[0]->failure().rank, 1);
}

// Once both passed the last Finish barrier, a peer leaving is normal.
TEST(MultiMachineTest, PeerLeavingAfterTheLastFinishIsNotAFailure) {
  FatalRecorder recorder;
  std::unique_ptr<MultiMachineSession> sessions[2];
  StartDataParallelPair(&recorder, sessions);
  ASSERT_TRUE(sessions[0] && sessions[1]);
  Status finished[2];
  std::thread other([&] {
    finished[1] = sessions[1]->Finish();
    sessions[1].reset();
  });
  finished[0] = sessions[0]->Finish();
  other.join();
  EXPECT_TRUE(finished[0].ok()) << finished[0];
  EXPECT_TRUE(finished[1].ok()) << finished[1];
  std::this_thread::sleep_for(milliseconds(3000));  // > peer_timeout
  std::lock_guard<std::mutex> lock(recorder.mutex);
  EXPECT_EQ(recorder.calls, 0);
  EXPECT_EQ(sessions[0]->failure().rank, -1);
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

// Over 3 machines the S(0) <-> S(1) all-to-alls (the batch S(0) -> S(1),
// the first weight's gradient S(1) -> S(0)) split unevenly: 20 features
// (7 + 7 + 6) and 16 hidden units (6 + 5 + 5) in 3; the batch of 15 in 5s.
// Each rank sends every peer only the block that peer's output needs
// (all_to_all_parts.h).
TEST(MultiMachineTest, ModelParallelOverThreeMachinesEqualsOneMachine) {
  for (compiler::ModelParallel mode :
       {compiler::ModelParallel::kSplitColumns, compiler::ModelParallel::kSplitRows}) {
    SCOPED_TRACE(mode == compiler::ModelParallel::kSplitRows ? "rows" : "columns");
    compiler::MlpSpec one = Spec("0:cpu:0-2");
    compiler::MlpSpec three = Spec("0-2:cpu:0");
    one.model_parallel = three.model_parallel = mode;
    one.batch = three.batch = 15;
    one.features = three.features = 20;
    one.hidden = three.hidden = {16};
    ExpectSameLoss(one, three, /*twice=*/false, /*bounce=*/false, /*machines=*/3);
  }
}

}  // namespace
}  // namespace oflite
