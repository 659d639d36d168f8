// The runtime follows each collective's compiled algorithm
// (TaskProto.collective) and refuses one it cannot run, naming the task: a
// compiled 2-machine data-parallel plan, rank 0's runtime built over a real
// CommNet (TCP on loopback).
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/runtime/commnet/commnet_actors.h"
#include "oneflow_lite/runtime/runtime.h"

namespace oflite {
namespace {

using std::chrono::milliseconds;

std::string FreeMaster() {
  int port = 0;
  auto fd = comm::ListenTcp("127.0.0.1", &port);
  CHECK(fd.ok());
  ::close(*fd);
  return "127.0.0.1:" + std::to_string(port);
}

// `exchange_max_bytes` 0: every all-reduce of this small MLP is a ring.
// Without gradient buckets: one collective per gradient (buckets:
// tests/gradient_bucket_test.cc, plan_verifier_test).
Plan DataParallelPlan(int64_t exchange_max_bytes = 0, int machines = 2) {
  compiler::MlpSpec spec;
  spec.batch = 12;
  spec.features = 20;
  spec.hidden = {12};
  spec.classes = 4;
  spec.placement = "0-" + std::to_string(machines - 1) + ":cpu:0";
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  CHECK(job.ok()) << job.status();
  compiler::CompileOptions options;
  options.exchange_max_bytes = exchange_max_bytes;
  options.fuse_max_bytes = 0;
  StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(machines, 1), options);
  CHECK(plan.ok()) << plan.status();
  return *plan;
}

// Machine 0's first collective task whose compiled algorithm is `algorithm`.
TaskProto* FirstCollective(Plan* plan, CollectiveAlgorithm algorithm) {
  for (TaskProto& task : *plan->mutable_machine(0)->mutable_task()) {
    if (task.type() == TASK_COLLECTIVE && task.collective().algorithm() == algorithm) {
      return &task;
    }
  }
  return nullptr;
}

// CommNets of ranks 0..world_size-1 (TCP on loopback), started together.
std::vector<std::unique_ptr<comm::CommNet>> StartNets(int world_size) {
  const std::string master = FreeMaster();
  std::vector<StatusOr<std::unique_ptr<comm::CommNet>>> started;
  for (int rank = 0; rank < world_size; ++rank) started.emplace_back(InternalError("not started"));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      comm::CommNetOptions options;
      options.rank = rank;
      options.world_size = world_size;
      options.master = master;
      options.job_token = "recorded-algorithm-test";
      options.connect_timeout = milliseconds(30000);
      options.on_peer_error = [](int, const Status&) {};  // teardown order is free
      started[rank] = comm::CommNet::Start(options);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::unique_ptr<comm::CommNet>> nets;
  for (auto& net : started) {
    CHECK(net.ok()) << net.status();
    nets.push_back(std::move(*net));
  }
  return nets;
}

// Builds (never runs) machine 0's runtime of `plan` over rank 0 of a CommNet
// of `world_size` ranks.
Status CreateRank0(const Plan& plan, int world_size = 2) {
  std::vector<std::unique_ptr<comm::CommNet>> nets = StartNets(world_size);
  CommNetRoute route(nets[0].get(), [](const Status&) {});
  ActorRegistry registry = MultiMachineActorRegistry(&route);
  RuntimeOptions options;
  options.machine_id = 0;
  options.remote_route = &route;
  options.registry = &registry;
  return Runtime::Create(plan, options).status();
}

TEST(RecordedAlgorithmTest, CompiledPlanRecordsRingAllReduceAndBuilds) {
  Plan plan = DataParallelPlan();
  ASSERT_NE(FirstCollective(&plan, COLLECTIVE_RING_ALL_REDUCE), nullptr);
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.type() == TASK_COLLECTIVE) {
        EXPECT_NE(t.collective().algorithm(), COLLECTIVE_UNSET) << t.name();
      }
    }
  }
  const Status created = CreateRank0(plan);
  EXPECT_TRUE(created.ok()) << created;  // the control for the refusals below
}

// With the default size rule the small gradients' all-reduces are compiled
// to the exchange, which this runtime follows; one whose recorded buffer
// does not match its tensor is refused like a ring.
TEST(RecordedAlgorithmTest, CompiledPlanRecordsExchangeAllReduceAndBuilds) {
  Plan plan = DataParallelPlan(compiler::CompileOptions().exchange_max_bytes);
  TaskProto* exchange = FirstCollective(&plan, COLLECTIVE_EXCHANGE_ALL_REDUCE);
  ASSERT_NE(exchange, nullptr);
  EXPECT_EQ(exchange->collective().chunk_bytes(), 0);
  const Status created = CreateRank0(plan);
  EXPECT_TRUE(created.ok()) << created;

  exchange->mutable_collective()->set_buffer_bytes(exchange->collective().buffer_bytes() + 4);
  const Status refused = CreateRank0(plan);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("collective task '" + exchange->name() + "'"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("COLLECTIVE_EXCHANGE_ALL_REDUCE cannot run"),
            std::string::npos)
      << refused;
}

// Recursive doubling runs over a power-of-2 ring only: recorded for a ring
// of 2 it builds, for a ring of 3 it is refused naming the task and why.
TEST(RecordedAlgorithmTest, DoublingNeedsAPowerOf2Ring) {
  Plan plan = DataParallelPlan(compiler::CompileOptions().exchange_max_bytes);
  TaskProto* task = FirstCollective(&plan, COLLECTIVE_EXCHANGE_ALL_REDUCE);
  ASSERT_NE(task, nullptr);
  task->mutable_collective()->set_algorithm(COLLECTIVE_DOUBLING_ALL_REDUCE);
  const Status created = CreateRank0(plan);
  EXPECT_TRUE(created.ok()) << created;

  Plan three = DataParallelPlan(compiler::CompileOptions().exchange_max_bytes, 3);
  task = FirstCollective(&three, COLLECTIVE_EXCHANGE_ALL_REDUCE);
  ASSERT_NE(task, nullptr);
  task->mutable_collective()->set_algorithm(COLLECTIVE_DOUBLING_ALL_REDUCE);
  const Status refused = CreateRank0(three, 3);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("collective task '" + task->name() + "'"), std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("needs a power-of-2 ring, this one has 3"), std::string::npos)
      << refused;
}

// From 3 ranks the all-reduces above the exchange's range up to 8 times its
// bound are compiled to scatter-gather (the MLP's 960-byte weight with a
// bound of 200: the exchange takes 100 bytes at 3 ranks, scatter-gather up
// to 1600), which builds; at 2 ranks the same weight keeps the ring, and
// scatter-gather recorded there builds too (it runs at any world).
TEST(RecordedAlgorithmTest, CompiledPlanRecordsScatterGatherFrom3RanksAndBuilds) {
  Plan three = DataParallelPlan(200, 3);
  TaskProto* task = FirstCollective(&three, COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  ASSERT_NE(task, nullptr);
  EXPECT_EQ(task->collective().buffer_bytes(), 20 * 12 * 4);
  EXPECT_EQ(task->collective().chunk_bytes(), 0);
  const Status created = CreateRank0(three, 3);
  EXPECT_TRUE(created.ok()) << created;

  Plan two = DataParallelPlan(200, 2);
  EXPECT_EQ(FirstCollective(&two, COLLECTIVE_SCATTER_GATHER_ALL_REDUCE), nullptr);
  task = FirstCollective(&two, COLLECTIVE_RING_ALL_REDUCE);
  ASSERT_NE(task, nullptr);
  task->mutable_collective()->set_algorithm(COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  const Status two_created = CreateRank0(two);
  EXPECT_TRUE(two_created.ok()) << two_created;
}

TEST(RecordedAlgorithmTest, UnsetAlgorithmIsRefusedNamingTheTask) {
  Plan plan = DataParallelPlan();
  TaskProto* task = FirstCollective(&plan, COLLECTIVE_RING_ALL_REDUCE);
  ASSERT_NE(task, nullptr);
  task->mutable_collective()->set_algorithm(COLLECTIVE_UNSET);
  const Status created = CreateRank0(plan);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.message().find("'" + task->name() + "'"), std::string::npos) << created;
  EXPECT_NE(created.message().find("records no algorithm"), std::string::npos) << created;
}

TEST(RecordedAlgorithmTest, ImpossibleRingIsRefusedNamingTheTaskAndWhy) {
  struct Case {
    const char* what;
    void (*tamper)(CollectiveConf*);
    const char* expect;
  };
  const Case cases[] = {
      {"all-gather of a P->B conversion",
       [](CollectiveConf* c) { c->set_algorithm(COLLECTIVE_RING_ALL_GATHER); }, "does not turn"},
      {"wrong element count",
       [](CollectiveConf* c) { c->set_element_count(c->element_count() + 1); }, "element_count"},
      {"chunk not a multiple of the element", [](CollectiveConf* c) { c->set_chunk_bytes(10); },
       "chunk_bytes 10"},
      {"no slots", [](CollectiveConf* c) { c->set_slots(0); }, "slots 0"},
  };
  for (const Case& c : cases) {
    Plan plan = DataParallelPlan();
    TaskProto* task = FirstCollective(&plan, COLLECTIVE_RING_ALL_REDUCE);
    ASSERT_NE(task, nullptr);
    c.tamper(task->mutable_collective());
    const Status created = CreateRank0(plan);
    ASSERT_FALSE(created.ok()) << c.what;
    EXPECT_NE(created.message().find("collective task '" + task->name() + "'"), std::string::npos)
        << c.what << ": " << created;
    EXPECT_NE(created.message().find("cannot run"), std::string::npos) << c.what << ": " << created;
    EXPECT_NE(created.message().find(c.expect), std::string::npos) << c.what << ": " << created;
  }
}

TEST(RecordedAlgorithmTest, RingSpanningMoreMachinesThanTheJobIsRefused) {
  // The compiled plan is consistent, but this CommNet has 1 rank, not 2.
  const Status created = CreateRank0(DataParallelPlan(), /*world_size=*/1);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.message().find("its ring tasks are not on distinct machines of the job's 1"),
            std::string::npos)
      << created;
}

TEST(RecordedAlgorithmTest, AllToAllIsFollowedWhereverItIsRecorded) {
  // The runtime does not second-guess the compiler: all-to-all needs no ring,
  // so rank 0's runtime builds even on a 1-rank CommNet.
  Plan plan = DataParallelPlan();
  for (TaskProto& task : *plan.mutable_machine(0)->mutable_task()) {
    if (task.type() != TASK_COLLECTIVE) continue;
    CollectiveConf all_to_all;
    all_to_all.set_algorithm(COLLECTIVE_ALL_TO_ALL);
    *task.mutable_collective() = all_to_all;
  }
  const Status created = CreateRank0(plan, /*world_size=*/1);
  EXPECT_TRUE(created.ok()) << created;
}

}  // namespace
}  // namespace oflite
