// A rank whose runtime fails for a local reason while ring collectives are
// in flight: real runtimes of a compiled data-parallel MLP plan, one per
// rank, each over its own CommNet (TCP sockets on loopback) in one process.
// Every rank keeps its CommNet up until all ranks are done, so peers can
// learn of the failure only from the abort notice, not from a lost
// connection; the ring deadline (120 s) and the watchdog (60 s) are far
// above the bounds asserted.
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/runtime/commnet/abort_notice.h"
#include "oneflow_lite/runtime/commnet/commnet_actors.h"
#include "oneflow_lite/runtime/runtime.h"

#include <unistd.h>

namespace oflite {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Counts ranks that are done; Wait returns when all are (or at the bound).
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void CountDown() {
    std::lock_guard<std::mutex> lock(mutex_);
    --count_;
    changed_.notify_all();
  }
  void Wait(milliseconds bound) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, bound, [&] { return count_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int count_;
};

struct RankOutcome {
  Status run;                   // Runtime::Run
  Clock::duration run_time{};   // Run
  Clock::duration teardown{};   // destroying the runtime (joins ring workers)
  Status notice;                // what the rank's AbortNotice saw first
  Status setup;                 // anything before Run
};

struct RankSetup {
  int rank = 0;
  std::string master;
  milliseconds watchdog{60000};
  bool run_runtime = true;      // false: builds its runtime but never runs it (stuck)
  bool broadcast_failure = true;  // what `oflite run` does when Run fails
};

std::string FreeMaster() {
  int port = 0;
  auto fd = comm::ListenTcp("127.0.0.1", &port);
  CHECK(fd.ok());
  ::close(*fd);
  return "127.0.0.1:" + std::to_string(port);
}

// One rank, wired like MultiMachineSession does (CommNet, route, actors with
// an AbortNotice), with the notice's handler only recording.
void RunRank(const Plan& plan, const RankSetup& setup, Latch* done, RankOutcome* out) {
  comm::CommNetOptions net_options;
  net_options.rank = setup.rank;
  net_options.world_size = plan.machine_size();
  net_options.master = setup.master;
  net_options.job_token = "ring-abort-test";
  net_options.connect_timeout = milliseconds(30000);
  net_options.on_peer_error = [](int, const Status&) {};  // peers stay up until all are done
  StatusOr<std::unique_ptr<comm::CommNet>> net = comm::CommNet::Start(net_options);
  if (!net.ok()) {
    out->setup = net.status();
    done->CountDown();
    return;
  }
  AbortNotice abort((*net)->transport(), (*net)->router(), nullptr);
  CommNetRoute route(net->get(), [](const Status&) {});
  CollectiveActorOptions collective;
  collective.abort = &abort;
  ActorRegistry registry = MultiMachineActorRegistry(&route, collective);
  auto run = [&]() -> Status {
    RuntimeOptions options;
    options.machine_id = setup.rank;
    options.check_nan = true;
    options.watchdog_timeout = setup.watchdog;
    options.remote_route = &route;
    options.registry = &registry;
    ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
    route.Attach(runtime->bus(), runtime->regsts());
    ASSIGN_OR_RETURN(const MachinePlan* part, FindMachinePlan(plan, setup.rank));
    RETURN_IF_ERROR(route.RegisterStaticRegisters(*part));
    RETURN_IF_ERROR((*net)->control()->Barrier("actors-ready", milliseconds(30000)));
    RETURN_IF_ERROR(route.FetchStaticKeys(*part, milliseconds(30000)));
    if (!setup.run_runtime) {  // a stuck peer: built, never run
      route.Detach();
      return Status::OK();
    }
    const auto start = Clock::now();
    out->run = runtime->Run();
    out->run_time = Clock::now() - start;
    if (!out->run.ok() && setup.broadcast_failure) abort.Broadcast(out->run);
    route.Detach();
    const auto teardown = Clock::now();
    runtime.reset();
    out->teardown = Clock::now() - teardown;
    return Status::OK();
  };
  out->setup = run();
  done->CountDown();
  done->Wait(milliseconds(60000));
  out->notice = abort.status();
}

StatusOr<Plan> DataParallelPlan(int machines) {
  compiler::MlpSpec spec;
  spec.batch = 6 * machines;
  spec.features = 20;
  spec.hidden = {12, 8};
  spec.classes = 4;
  spec.placement = "0-" + std::to_string(machines - 1) + ":cpu:0";
  spec.iterations = 50;
  ASSIGN_OR_RETURN(Job job, compiler::BuildMlpJob(spec));
  return compiler::Compile(job, compiler::MakeCluster(machines, 1));
}

// Machine `machine`'s optimizer updates get learning rate 1e30: after the
// first update its weights overflow and the NaN check fails its next
// forward pass, while the other machines already wait in that iteration's
// gradient all-reduce for its part.
int PoisonLearningRate(Plan* plan, int64_t machine) {
  int poisoned = 0;
  for (MachinePlan& part : *plan->mutable_machine()) {
    if (part.machine_id() != machine) continue;
    for (TaskProto& task : *part.mutable_task()) {
      for (KernelConf& kernel : *task.mutable_kernel()) {
        for (AttrEntry& attr : *kernel.mutable_op()->mutable_attr()) {
          if (attr.key() == "base_lr") {
            attr.mutable_value()->set_f(1e30);
            ++poisoned;
          }
        }
      }
    }
  }
  return poisoned;
}

TEST(RingAbortTest, LocalFailureOfOneRankEndsEveryPeerNamingIt) {
  StatusOr<Plan> plan = DataParallelPlan(3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  Plan poisoned = *plan;
  ASSERT_GT(PoisonLearningRate(&poisoned, 1), 0) << "no base_lr attribute on machine 1";
  const std::string master = FreeMaster();
  Latch done(3);
  RankOutcome outcomes[3];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      RankSetup setup;
      setup.rank = rank;
      setup.master = master;
      RunRank(rank == 1 ? poisoned : *plan, setup, &done, &outcomes[rank]);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < 3; ++rank) ASSERT_TRUE(outcomes[rank].setup.ok()) << outcomes[rank].setup;
  EXPECT_NE(outcomes[1].run.message().find("NaN"), std::string::npos) << outcomes[1].run;
  EXPECT_EQ(outcomes[1].notice, outcomes[1].run);
  for (int rank : {0, 2}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const RankOutcome& out = outcomes[rank];
    EXPECT_FALSE(out.run.ok());
    EXPECT_NE(out.run.message().find("rank 1 failed: "), std::string::npos) << out.run;
    EXPECT_NE(out.run.message().find("NaN"), std::string::npos) << out.run;
    EXPECT_EQ(out.notice.code(), StatusCode::kAborted);
    EXPECT_LT(out.run_time, milliseconds(30000));
    EXPECT_LT(out.teardown, milliseconds(10000));
  }
}

// Rank 0 joins but never runs (stuck), so rank 1's all-reduce can never
// complete; rank 1's watchdog fires with the ring in flight. Its ring
// worker must stop at once (not at the ring's set-up or 120 s deadline), with
// or without the broadcast, and with it rank 0 hears why.
TEST(RingAbortTest, AbortedRankStopsItsOwnRingInFlight) {
  StatusOr<Plan> plan = DataParallelPlan(2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (bool broadcast : {true, false}) {
    SCOPED_TRACE(broadcast ? "with broadcast" : "teardown only");
    const std::string master = FreeMaster();
    Latch done(2);
    RankOutcome outcomes[2];
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        RankSetup setup;
        setup.rank = rank;
        setup.master = master;
        setup.run_runtime = rank == 1;
        setup.watchdog = milliseconds(1500);
        setup.broadcast_failure = broadcast;
        RunRank(*plan, setup, &done, &outcomes[rank]);
      });
    }
    for (auto& thread : threads) thread.join();
    ASSERT_TRUE(outcomes[0].setup.ok()) << outcomes[0].setup;
    ASSERT_TRUE(outcomes[1].setup.ok()) << outcomes[1].setup;
    const Status& run = outcomes[1].run;
    EXPECT_EQ(run.code(), StatusCode::kDeadlineExceeded) << run;
    EXPECT_NE(run.message().find("ring collective of piece 0 in flight"), std::string::npos)
        << run;
    EXPECT_LT(outcomes[1].teardown, milliseconds(10000));
    if (broadcast) {
      EXPECT_EQ(outcomes[0].notice.code(), StatusCode::kAborted) << outcomes[0].notice;
      EXPECT_NE(outcomes[0].notice.message().find("rank 1 failed: DEADLINE_EXCEEDED: watchdog"),
                std::string::npos)
          << outcomes[0].notice;
    } else {
      EXPECT_TRUE(outcomes[0].notice.ok()) << outcomes[0].notice;
    }
  }
}

// The same stuck peer with the gradients fused into a bucket
// (compiler/gradient_buckets.h): the rank still ends within its bounds, and
// the watchdog's report names the bucket's members where it describes the
// fused collective (which waits for this iteration's gradients behind the
// loss's all-gather).
TEST(RingAbortTest, StuckPeerReportNamesTheBucketsMembers) {
  StatusOr<Plan> plan = DataParallelPlan(2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> members;
  for (const TaskProto& task : plan->machine(1).task()) {
    for (const CollectiveMember& m : task.collective().member()) members.push_back(m.lbn());
  }
  ASSERT_GE(members.size(), 2u) << "the plan has no gradient bucket";
  const std::string master = FreeMaster();
  Latch done(2);
  RankOutcome outcomes[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      RankSetup setup;
      setup.rank = rank;
      setup.master = master;
      setup.run_runtime = rank == 1;
      setup.watchdog = milliseconds(3000);
      RunRank(*plan, setup, &done, &outcomes[rank]);
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(outcomes[0].setup.ok()) << outcomes[0].setup;
  ASSERT_TRUE(outcomes[1].setup.ok()) << outcomes[1].setup;
  const Status& run = outcomes[1].run;
  EXPECT_EQ(run.code(), StatusCode::kDeadlineExceeded) << run;
  std::string named = "bucket of ";
  for (size_t m = 0; m < members.size(); ++m) named += (m ? ", " : "") + members[m];
  EXPECT_NE(run.message().find(named + ": "), std::string::npos) << run;
  EXPECT_LT(outcomes[1].teardown, milliseconds(10000));
  EXPECT_EQ(outcomes[0].notice.code(), StatusCode::kAborted) << outcomes[0].notice;
}

}  // namespace
}  // namespace oflite
