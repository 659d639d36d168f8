// The simulator on plans whose step time is known by hand: chains on one
// and on several threads, back-pressure with regst_num 1 and 2, a ring
// all-reduce under the link model, a 1F1B pipeline with its weights'
// updates, CPU sharing between machines, and the same result twice.
#include "oneflow_lite/cost/simulator.h"

#include <algorithm>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/cost/calibration.h"
#include "oneflow_lite/cost/kernel_key.h"

namespace oflite {
namespace cost {
namespace {

// Builds small plans by hand: every compute task runs one kernel of its own
// op type ("work_<name>") whose time the calibration states.
class PlanBuilder {
 public:
  explicit PlanBuilder(int machines = 1) {
    for (int m = 0; m < machines; ++m) {
      MachineProto* machine = plan_.mutable_cluster()->add_machine();
      machine->set_id(m);
      machine->set_cpu_devices(1);
      machine->set_cpu_threads(1);
      plan_.add_machine()->set_machine_id(m);
    }
    plan_.set_total_iters(10);
    calibration_.set_version(1);
  }

  // A task on `stream` of machine `machine`; `us`: its kernel's time (< 0:
  // a task without kernels of `type`).
  int64_t Task(const std::string& name, int machine, int stream, double us,
               TaskType type = TASK_COMPUTE) {
    TaskIdParts parts;
    parts.stream.machine = machine;
    parts.stream.device_type = DEVICE_CPU;
    parts.stream.device_index = 0;
    parts.stream.stream = stream;
    parts.task_index = next_index_++;
    int64_t id = EncodeTaskId(parts).value();
    TaskProto* task = plan_.mutable_machine(machine)->add_task();
    task->set_task_id(id);
    task->set_name(name);
    task->set_type(type);
    task->set_machine_id(machine);
    task->set_device_type(DEVICE_CPU);
    if (us >= 0) {
      KernelConf* kernel = task->add_kernel();
      kernel->mutable_op()->set_name(name);
      kernel->mutable_op()->set_op_type("work_" + name);
      kernel->set_dtype(DT_FLOAT);
      times_[id] = us;
    }
    return id;
  }

  // producer -> consumer through a register desc of `regst_num` copies.
  int64_t Edge(int64_t producer, int64_t consumer, int regst_num = 2, int64_t bytes = 0,
               bool mutator = false) {
    TaskProto* p = FindTask(producer);
    RegstDescProto* regst = p->add_produced();
    regst->set_regst_desc_id(next_regst_++);
    regst->set_producer_task_id(producer);
    regst->add_consumer_task_id(consumer);
    if (mutator) regst->add_mutator_task_id(consumer);
    regst->set_regst_num(regst_num);
    regst->set_bytes_per_regst(bytes);
    ConsumedRegst* c = FindTask(consumer)->add_consumed();
    c->set_name("in_" + std::to_string(regst->regst_desc_id()));
    c->add_regst_desc_id(regst->regst_desc_id());
    return regst->regst_desc_id();
  }

  // Adds another consumer to an existing register desc.
  void AlsoConsumes(int64_t regst_desc_id, int64_t consumer, bool mutator = false) {
    for (MachinePlan& m : *plan_.mutable_machine()) {
      for (TaskProto& t : *m.mutable_task()) {
        for (RegstDescProto& r : *t.mutable_produced()) {
          if (r.regst_desc_id() != regst_desc_id) continue;
          r.add_consumer_task_id(consumer);
          if (mutator) r.add_mutator_task_id(consumer);
          ConsumedRegst* c = FindTask(consumer)->add_consumed();
          c->set_name("in_" + std::to_string(regst_desc_id));
          c->add_regst_desc_id(regst_desc_id);
        }
      }
    }
  }

  Plan& plan() { return plan_; }

  // The calibration with every kernel's time (keys as the simulator
  // computes them) and the runtime's costs.
  Calibration MakeCalibration(double act_us = 0, double message_us = 0) {
    Calibration c = calibration_;
    c.mutable_runtime()->set_act_us(act_us);
    c.mutable_runtime()->set_message_us(message_us);
    c.mutable_runtime()->set_copy_gbyte_per_s(1e6);
    PlanIndex index(plan_);
    for (const TaskProto* task : index.tasks()) {
      for (const KernelConf& kernel : task->kernel()) {
        KernelCost* k = c.add_kernel();
        k->set_key(KernelKey(kernel, DEVICE_CPU, 1, index).value());
        k->set_op_type(kernel.op().op_type());
        k->set_device_type(DEVICE_CPU);
        k->set_threads(1);
        k->set_us(times_.at(task->task_id()));
        k->set_samples(5);
      }
    }
    return c;
  }

  TaskProto* FindTask(int64_t id) {
    for (MachinePlan& m : *plan_.mutable_machine()) {
      for (TaskProto& t : *m.mutable_task()) {
        if (t.task_id() == id) return &t;
      }
    }
    return nullptr;
  }

 private:
  Plan plan_;
  Calibration calibration_;
  std::map<int64_t, double> times_;
  int64_t next_index_ = 0;
  int64_t next_regst_ = 1;
};

SimResult Simulate(PlanBuilder& b, double act_us = 0, double message_us = 0,
                   SimOptions options = {}) {
  StatusOr<SimResult> r = SimulatePlan(b.plan(), b.MakeCalibration(act_us, message_us), options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(r).value() : SimResult{};
}

TEST(SimulatorTest, ChainOnOneThreadIsTheSumOfItsActs) {
  PlanBuilder b;
  int64_t a = b.Task("a", 0, 0, 10);
  int64_t c = b.Task("b", 0, 0, 20);
  int64_t d = b.Task("c", 0, 0, 30);
  b.Edge(a, c);
  b.Edge(c, d);
  SimResult r = Simulate(b);
  EXPECT_DOUBLE_EQ(r.step_time_us, 60);
  EXPECT_EQ(r.kernels_measured, 3);
  EXPECT_EQ(r.kernels_missing, 0);
  // With the runtime's act cost: 3 acts per step.
  SimResult with_cost = Simulate(b, /*act_us=*/1);
  EXPECT_DOUBLE_EQ(with_cost.step_time_us, 63);
  // The work charged to the machine's acts a step: the kernels and the
  // runtime's per-act cost (what --trace-cpu's kernel CPU compares with).
  ASSERT_EQ(r.machines.size(), 1u);
  EXPECT_DOUBLE_EQ(r.machines[0].compute_us_per_step, 60);
  EXPECT_DOUBLE_EQ(with_cost.machines[0].compute_us_per_step, 63);
  // All its CPU: the same acts, no communication.
  EXPECT_DOUBLE_EQ(with_cost.machines[0].cpu_us_per_step, 63);
  EXPECT_DOUBLE_EQ(with_cost.machines[0].comm_cpu_us_per_step, 0);
}

TEST(SimulatorTest, ChainOverThreadsPipelinesByRegstNum) {
  for (int regst_num : {1, 2}) {
    PlanBuilder b;
    int64_t a = b.Task("a", 0, 0, 10);
    int64_t c = b.Task("b", 0, 1, 20);
    int64_t d = b.Task("c", 0, 2, 30);
    b.Edge(a, c, regst_num);
    b.Edge(c, d, regst_num);
    SimResult r = Simulate(b);
    // regst_num 2: the slowest stage sets the pace. regst_num 1: b cannot
    // write its next output until c returned the one copy, so b and c take
    // turns: 20 + 30.
    EXPECT_DOUBLE_EQ(r.step_time_us, regst_num == 2 ? 30 : 50) << "regst_num " << regst_num;
    double busiest = 0;
    for (const SimThreadStat& t : r.threads) busiest = std::max(busiest, t.busy_share);
    EXPECT_NEAR(busiest, regst_num == 2 ? 1.0 : 0.6, 1e-9);
  }
}

TEST(SimulatorTest, MessagesBetweenThreadsCostTheRuntimesMessageTime) {
  PlanBuilder b;
  int64_t a = b.Task("a", 0, 0, 10);
  int64_t c = b.Task("b", 0, 1, 10);
  b.Edge(a, c, 1);
  // regst_num 1: a's next act waits for b's "returned": a (10) + message
  // (3) + b (10) + message back (3).
  SimResult r = Simulate(b, 0, /*message_us=*/3);
  EXPECT_DOUBLE_EQ(r.step_time_us, 26);
}

// One collective task per machine over a ring, fed by a source.
Plan RingPlan(PlanBuilder& b, int machines, int64_t bytes, CollectiveAlgorithm algorithm,
              double source_us = 0, int regst_num = 2) {
  std::vector<int64_t> ring;
  std::vector<int64_t> sources;
  for (int m = 0; m < machines; ++m) {
    sources.push_back(b.Task("src" + std::to_string(m), m, 0, source_us, TASK_COMPUTE));
    ring.push_back(b.Task("ring" + std::to_string(m), m, 1, -1, TASK_COLLECTIVE));
  }
  for (int m = 0; m < machines; ++m) {
    b.Edge(sources[m], ring[m], regst_num, bytes);
    TaskProto* task = b.FindTask(ring[m]);
    task->mutable_boxing()->set_kind(BOXING_ALL_REDUCE);
    task->mutable_boxing()->set_lbn("g/out_0");
    task->mutable_boxing()->set_ring_rank(m);
    for (int64_t id : ring) task->mutable_boxing()->add_ring_task_id(id);
    task->mutable_collective()->set_algorithm(algorithm);
    task->mutable_collective()->set_buffer_bytes(bytes);
    MachineProto* machine = b.plan().mutable_cluster()->mutable_machine(m);
    machine->mutable_nic()->set_gbit_per_s(1);   // 125 bytes per us
    machine->mutable_nic()->set_latency_us(10);
  }
  return b.plan();
}

TEST(SimulatorTest, RingAllReduceFollowsTheAlphaBetaModel) {
  for (int n : {2, 4}) {
    PlanBuilder b(n);
    const int64_t bytes = 1000000;
    RingPlan(b, n, bytes, COLLECTIVE_RING_ALL_REDUCE);
    SimResult r = Simulate(b);
    // Each rank sends 2 (n - 1) / n of the tensor at 125 bytes/us, plus
    // 2 (n - 1) link latencies; one collective at a time per ring.
    double expected = 2.0 * (n - 1) / n * bytes / 125.0 + 2 * (n - 1) * 10;
    EXPECT_NEAR(r.step_time_us, expected, 1e-3 * expected) << n << " machines";
    for (const SimMachineStat& m : r.machines) {
      EXPECT_NEAR(m.egress_bytes_per_step, 2.0 * (n - 1) / n * bytes, 1e-6);
      // Nothing computes: all of it is exposed.
      EXPECT_NEAR(m.exposed_comm_us_per_step, expected, 1e-3 * expected);
    }
    ASSERT_FALSE(r.critical_path.empty());
    EXPECT_EQ(r.critical_path[0].kind, "collective");
  }
}

TEST(SimulatorTest, BytesCostCpuAtBothEndsOnTheMachinesCores) {
  PlanBuilder b(2);
  const int64_t bytes = 1000000;
  RingPlan(b, 2, bytes, COLLECTIVE_RING_ALL_REDUCE);
  for (int m = 0; m < 2; ++m) {
    b.plan().mutable_cluster()->mutable_machine(m)->mutable_nic()->set_cpu_ns_per_byte(20);
  }
  // Each rank sends and receives 1e6 bytes at 20 ns each: 20 ms of CPU per
  // side, more than the link's 8 ms; on cores of their own both sides run
  // at once.
  SimResult own = Simulate(b);
  EXPECT_NEAR(own.step_time_us, 20000 + 2 * 10, 1.0);
  // The CPU each machine was charged a step: 20 ms for the bytes it sends
  // and 20 for those it receives, and nothing for acts (the sources take
  // no time, the calibration has no copy speed).
  for (const SimMachineStat& m : own.machines) {
    EXPECT_NEAR(m.comm_cpu_us_per_step, 40000, 1.0) << "machine " << m.machine;
    EXPECT_NEAR(m.cpu_us_per_step, 40000, 1.0) << "machine " << m.machine;
  }
  // Both machines on one core: four such loads share it.
  b.plan().mutable_cluster()->mutable_machine(0)->set_cpu_set("0");
  b.plan().mutable_cluster()->mutable_machine(1)->set_cpu_set("0");
  SimResult shared = Simulate(b);
  EXPECT_NEAR(shared.step_time_us, 80000 + 2 * 10, 1.0);
  // The same CPU a step, now over twice the time.
  for (const SimMachineStat& m : shared.machines) {
    EXPECT_NEAR(m.comm_cpu_us_per_step, 40000, 1.0) << "machine " << m.machine;
  }
}

TEST(SimulatorTest, InSituTimesAndFactorsReplaceIsolatedOnes) {
  PlanBuilder b;
  int64_t a = b.Task("a", 0, 0, 10);
  int64_t c = b.Task("b", 0, 0, 20);
  b.Edge(a, c);
  Calibration cal = b.MakeCalibration();
  // a: measured inside a run at 15 us; b's op type runs 1.5x slower in situ.
  for (KernelCost& k : *cal.mutable_kernel()) {
    if (k.op_type() == "work_a") k.set_in_situ_us(15);
  }
  InSituFactor* f = cal.add_in_situ_factor();
  f->set_op_type("work_b");
  f->set_device_type(DEVICE_CPU);
  f->set_threads(1);
  f->set_factor(1.5);
  StatusOr<SimResult> r = SimulatePlan(b.plan(), cal, SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->step_time_us, 15 + 30, 1e-9);
  // The runtime's cost per act measured inside a run replaces the one of
  // empty actors: two acts per step.
  cal.mutable_runtime()->set_act_us(0.5);
  cal.mutable_runtime()->set_in_situ_act_us(2);
  StatusOr<SimResult> with_runtime = SimulatePlan(b.plan(), cal, SimOptions{});
  ASSERT_TRUE(with_runtime.ok());
  EXPECT_NEAR(with_runtime->step_time_us, 15 + 30 + 2 * 2, 1e-9);
}

// The caches' term: a -> b -> c on one thread, 1000-byte registers, the
// caches hold 500 bytes. Each step b's input was just written by a
// (warm), but its output register was last touched by c a step before,
// and a's 1000 bytes went through the caches since: half of b's tensors
// come from memory, so b takes half its cold extra more (20 + (40 - 20) /
// 2). a has no cold time; c reads what b just wrote.
TEST(SimulatorTest, TensorsOutOfCacheCostTheirShareOfTheColdTime) {
  PlanBuilder b;
  int64_t a = b.Task("a", 0, 0, 10);
  int64_t m = b.Task("b", 0, 0, 20);
  int64_t c = b.Task("c", 0, 0, 10);
  b.Edge(a, m, /*regst_num=*/1, /*bytes=*/1000);
  b.Edge(m, c, /*regst_num=*/1, /*bytes=*/1000);
  Calibration cal = b.MakeCalibration();
  for (KernelCost& k : *cal.mutable_kernel()) {
    if (k.op_type() == "work_b") k.set_cold_us(40);
  }
  auto step = [&] {
    StatusOr<SimResult> r = SimulatePlan(b.plan(), cal, SimOptions{});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->step_time_us : -1;
  };
  // Not measured (cache_bytes 0): every kernel warm.
  EXPECT_NEAR(step(), 40, 1e-9);

  cal.mutable_runtime()->set_cache_bytes(500);
  EXPECT_NEAR(step(), 10 + 30 + 10, 1e-9);

  // Caches that hold both registers: warm again.
  cal.mutable_runtime()->set_cache_bytes(5000);
  EXPECT_NEAR(step(), 40, 1e-9);

  // The op type's in-situ factor is not for a kernel with a cold time: the
  // caches' term stands for what a run does to it.
  cal.mutable_runtime()->set_cache_bytes(500);
  InSituFactor* f = cal.add_in_situ_factor();
  f->set_op_type("work_b");
  f->set_device_type(DEVICE_CPU);
  f->set_threads(1);
  f->set_factor(1.5);
  EXPECT_NEAR(step(), 10 + 30 + 10, 1e-9);
  // Without the caches' size it is: 1.5 x 20.
  cal.mutable_runtime()->set_cache_bytes(0);
  EXPECT_NEAR(step(), 10 + 30 + 10, 1e-9);

  // A kernel timed inside a run has met the caches as a run leaves them.
  cal.mutable_runtime()->set_cache_bytes(500);
  for (KernelCost& k : *cal.mutable_kernel()) {
    if (k.op_type() == "work_b") k.set_in_situ_us(25);
  }
  EXPECT_NEAR(step(), 10 + 25 + 10, 1e-9);
}

TEST(SimulatorTest, ExchangeSendsTheWholeTensorToEveryPeerInOneLatency) {
  PlanBuilder b(4);
  const int64_t bytes = 100000;
  RingPlan(b, 4, bytes, COLLECTIVE_EXCHANGE_ALL_REDUCE);
  SimResult r = Simulate(b);
  EXPECT_NEAR(r.step_time_us, 3.0 * bytes / 125.0 + 10, 1e-2);
}

// A shaped link's token bucket. The first iteration computes 1 ms (the
// bucket is full), then exchanges 100 kB: the burst's bytes leave at once,
// the rest at 125 bytes/us. Without a bucket all of it waits for the rate.
TEST(SimulatorTest, AShapedLinksBurstPassesAtOnceAfterIdleTime) {
  const int64_t bytes = 200000;
  for (double burst : {0.0, 60000.0, 250000.0}) {
    PlanBuilder b(2);
    RingPlan(b, 2, bytes, COLLECTIVE_EXCHANGE_ALL_REDUCE, 1000);
    for (int m = 0; m < 2; ++m) {
      b.plan().mutable_cluster()->mutable_machine(m)->mutable_nic()->set_burst_bytes(burst);
    }
    SimResult r = Simulate(b);
    const double first = 1000 + std::max(0.0, bytes - burst) / 125.0 + 10;
    EXPECT_NEAR(r.first_iteration_us, first, 1e-3 * first) << "burst " << burst;
    // Every byte still counts as sent.
    for (const SimMachineStat& m : r.machines) {
      EXPECT_NEAR(m.egress_bytes_per_step, bytes, 1e-6) << "burst " << burst;
    }
    // A bucket does not raise the average rate: 200 kB a step is 1.6 ms
    // at the rate, more than the source's 1 ms, so exchanges end up back
    // to back (even with a bucket deeper than the exchange) and only the
    // 10 us between them refill it.
    const double steady = (bytes - (burst > 0 ? 1250 : 0)) / 125.0 + 10;
    EXPECT_NEAR(r.step_time_us, steady, 1e-3 * steady) << "burst " << burst;
  }
}

TEST(SimulatorTest, TransportCurveIsTheFloorOfACollective) {
  PlanBuilder b(2);
  RingPlan(b, 2, 1000, COLLECTIVE_RING_ALL_REDUCE);
  Calibration c = b.MakeCalibration();
  TransportCost* t = c.add_transport();
  t->set_name("tcp");
  t->set_latency_us(5);
  t->set_gbyte_per_s(1);
  CollectiveCurve* curve = t->add_collective();
  curve->set_algorithm(COLLECTIVE_RING_ALL_REDUCE);
  curve->set_ranks(2);
  CurvePoint* p = curve->add_point();
  p->set_bytes(4096);
  p->set_us(500);
  StatusOr<SimResult> r = SimulatePlan(b.plan(), c, SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  // Link: 1000 / 125 + 2 x 10 = 28 us; the measured curve says 500 us at
  // its smallest size, which bounds the time from below.
  EXPECT_NEAR(r->step_time_us, 500, 1e-3);

  // A curve of 2 ranks says nothing of 4: the ring over 4 machines falls
  // back to the transport's latency (6 steps x 5 us) and stream rate, and
  // the link's time (1500 / 125 + 6 x 10 = 72 us) is the larger.
  PlanBuilder four(4);
  RingPlan(four, 4, 1000, COLLECTIVE_RING_ALL_REDUCE);
  Calibration c4 = four.MakeCalibration();
  *c4.add_transport() = *t;
  StatusOr<SimResult> r4 = SimulatePlan(four.plan(), c4, SimOptions{});
  ASSERT_TRUE(r4.ok()) << r4.status();
  EXPECT_NEAR(r4->step_time_us, 72, 1.0);
}

// The collective choice's time: an algorithm other than the ring is no
// candidate above the largest size its curve measured (whole buffers: no
// extrapolation), the ring is extrapolated, and a link that dominates sets
// the time of both.
TEST(SimulatorTest, ChoiceTimesStopAtTheMeasuredSizesOfWholeBufferAlgorithms) {
  Calibration c;
  TransportCost* t = c.add_transport();
  t->set_name("tcp");
  t->set_latency_us(5);
  t->set_gbyte_per_s(1);
  for (CollectiveAlgorithm a : {COLLECTIVE_RING_ALL_REDUCE, COLLECTIVE_EXCHANGE_ALL_REDUCE}) {
    CollectiveCurve* curve = t->add_collective();
    curve->set_algorithm(a);
    curve->set_ranks(2);
    for (int64_t bytes : {int64_t{4096}, int64_t{1} << 20}) {
      CurvePoint* p = curve->add_point();
      p->set_bytes(bytes);
      p->set_us(a == COLLECTIVE_RING_ALL_REDUCE ? bytes / 100.0 : bytes / 200.0);
    }
  }
  const CostTables tables(c);
  const TransportCost* tcp = tables.transport("tcp");
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(CollectiveCurveMaxBytes(*tcp, COLLECTIVE_EXCHANGE_ALL_REDUCE, 2), int64_t{1} << 20);
  EXPECT_EQ(CollectiveCurveMaxBytes(*tcp, COLLECTIVE_EXCHANGE_ALL_REDUCE, 4), -1);
  LinkSpec none;
  // Within the curves: each its own curve (1 MiB: 10485.76 and 5242.88 us).
  EXPECT_NEAR(PredictCollectiveUs(tables, tcp, none, COLLECTIVE_RING_ALL_REDUCE, 2, 1 << 20),
              10485.76, 1e-6);
  EXPECT_NEAR(PredictCollectiveUs(tables, tcp, none, COLLECTIVE_EXCHANGE_ALL_REDUCE, 2, 1 << 20),
              5242.88, 1e-6);
  // Above them: the ring extrapolated along its last segment, the exchange
  // no candidate.
  EXPECT_NEAR(PredictCollectiveUs(tables, tcp, none, COLLECTIVE_RING_ALL_REDUCE, 2, 1 << 21),
              20971.52, 1e-6);
  EXPECT_EQ(PredictCollectiveUs(tables, tcp, none, COLLECTIVE_EXCHANGE_ALL_REDUCE, 2, 1 << 21), -1);
  // Over 4 ranks there is no exchange curve: the latency and stream-rate
  // model applies at any size.
  EXPECT_GT(PredictCollectiveUs(tables, tcp, none, COLLECTIVE_EXCHANGE_ALL_REDUCE, 4, 1 << 22), 0);
  // A 1 Gbit/s link (125 bytes a us) sets both rings' time where it is the
  // slower: 1 MiB sent a rank by the ring of 2 = 8388.608 us + 2 x 10.
  LinkSpec slow;
  slow.set_gbit_per_s(1);
  slow.set_latency_us(10);
  EXPECT_NEAR(PredictCollectiveUs(tables, tcp, slow, COLLECTIVE_RING_ALL_REDUCE, 2, 1 << 20),
              10485.76, 1e-6);
  EXPECT_NEAR(PredictCollectiveUs(tables, tcp, slow, COLLECTIVE_EXCHANGE_ALL_REDUCE, 2, 1 << 20),
              8388.608 + 10, 1e-6);
}

// A two-stage pipeline of two micro-batches per iteration: per stage a
// variable whose readers are the stage's forward and backward acts and
// whose mutator is its update, 1F1B order by control edges.
TEST(SimulatorTest, OneFOneBPipelineTakesMPlusSMinusOneSlots) {
  PlanBuilder b;
  const double tf = 10, tb = 20;
  int64_t src = b.Task("src", 0, 0, 0);
  int64_t f[2][2], bw[2][2], var[2], upd[2];
  for (int s = 0; s < 2; ++s) {
    var[s] = b.Task("var" + std::to_string(s), 0, 10 + s, -1, TASK_VARIABLE);
    upd[s] = b.Task("upd" + std::to_string(s), 0, 10 + s, 0);
    for (int k = 0; k < 2; ++k) {
      f[s][k] = b.Task("f" + std::to_string(s) + std::to_string(k), 0, 10 + s, tf);
      bw[s][k] = b.Task("b" + std::to_string(s) + std::to_string(k), 0, 10 + s, tb);
    }
  }
  for (int s = 0; s < 2; ++s) {
    int64_t w = b.Edge(var[s], f[s][0], 1);
    b.AlsoConsumes(w, f[s][1]);
    b.AlsoConsumes(w, bw[s][0]);
    b.AlsoConsumes(w, bw[s][1]);
    b.AlsoConsumes(w, upd[s], /*mutator=*/true);
    b.Edge(bw[s][0], upd[s], 1);
    b.Edge(bw[s][1], upd[s], 1);
  }
  for (int k = 0; k < 2; ++k) {
    b.Edge(src, f[0][k], 1);
    b.Edge(f[0][k], f[1][k], 1);
    b.Edge(f[1][k], bw[1][k], 1);
    b.Edge(bw[1][k], bw[0][k], 1);
    b.Edge(f[0][k], bw[0][k], 1);  // activations kept for the backward
  }
  // 1F1B: stage 0 runs f00 f01 b00 b01, stage 1 f10 b10 f11 b11.
  b.Edge(f[0][0], f[0][1], 1);
  b.Edge(f[0][1], bw[0][0], 1);
  b.Edge(bw[0][0], bw[0][1], 1);
  b.Edge(f[1][0], bw[1][0], 1);
  b.Edge(bw[1][0], f[1][1], 1);
  b.Edge(f[1][1], bw[1][1], 1);
  SimResult r = Simulate(b);
  // (M + S - 1) (tf + tb) = 3 x 30: the next iteration's forwards wait for
  // the updates.
  EXPECT_DOUBLE_EQ(r.step_time_us, 90);
}

TEST(SimulatorTest, MachinesSharingACoreRunAtHalfSpeed) {
  PlanBuilder b(2);
  b.Task("a", 0, 0, 100);
  b.Task("b", 1, 0, 100);
  SimResult alone = Simulate(b);
  EXPECT_DOUBLE_EQ(alone.step_time_us, 100);
  b.plan().mutable_cluster()->mutable_machine(0)->set_cpu_set("0");
  b.plan().mutable_cluster()->mutable_machine(1)->set_cpu_set("0");
  SimResult shared = Simulate(b);
  EXPECT_DOUBLE_EQ(shared.step_time_us, 200);
  b.plan().mutable_cluster()->mutable_machine(1)->set_cpu_set("1");
  SimResult apart = Simulate(b);
  EXPECT_DOUBLE_EQ(apart.step_time_us, 100);
}

// With a calibrated time slice, compute threads of machines sharing a core
// take turns instead of sharing it fluidly: the same throughput, but the
// one that went first ends its act a part of a slice sooner.
TEST(SimulatorTest, ComputeOnASharedCoreTakesTurnsOfTheCalibratedSlice) {
  auto first_acts = [](double slice_us) {
    PlanBuilder b(2);
    b.Task("a", 0, 0, 100);
    b.Task("b", 1, 0, 100);
    b.plan().mutable_cluster()->mutable_machine(0)->set_cpu_set("0");
    b.plan().mutable_cluster()->mutable_machine(1)->set_cpu_set("0");
    Calibration cal = b.MakeCalibration();
    cal.mutable_runtime()->set_core_slice_us(slice_us);
    SimOptions options;
    options.record_timeline = true;
    StatusOr<SimResult> r = SimulatePlan(b.plan(), cal, options);
    EXPECT_TRUE(r.ok()) << r.status();
    std::map<std::string, double> end;
    for (const SimEvent& e : r->timeline) {
      if (e.category == "act" && e.iteration == 0) end[e.name] = e.end_us;
    }
    // The same work per core: 200 us per iteration on average (the
    // steady-state window need not hold whole rounds of turns).
    EXPECT_NEAR(r->step_time_us, 200, slice_us > 0 ? 20 : 0) << "slice " << slice_us;
    return std::make_pair(end["a"], end["b"]);
  };
  using Ends = std::pair<double, double>;
  EXPECT_EQ(first_acts(0), Ends(200, 200));  // fluid: both at half speed
  // Turns of 30 us: a 0-30, b 30-60, a 60-90, ... a's last 10 us at
  // 180-190; its next act follows at once, so a keeps the core to the end
  // of its turn (210), and b's last 10 us run 210-220.
  EXPECT_EQ(first_acts(30), Ends(190, 220));
  // A slice longer than an act: a keeps the core for its next acts (they
  // follow at once) until the slice is used up, then b gets it.
  EXPECT_EQ(first_acts(1000), Ends(100, 1100));
}

// p (100 us, machine 0) -> a READ by c (machine 1) -> d (10 us), each
// machine on a core of its own, and hog (1000 us) computing on the
// producer's core after p (`producer_busy`) or back to back on the reader's.
void ReadPlanWithHog(PlanBuilder* b, bool producer_busy) {
  int64_t p = b->Task("p", 0, 0, 100);
  int64_t hog = producer_busy ? b->Task("hog", 0, 1, 1000) : b->Task("hog", 1, 1, 1000);
  if (producer_busy) b->Edge(p, hog, 1);  // starts with the READ, at 100
  int64_t c = b->Task("c", 1, 2, -1, TASK_COMMNET);
  b->FindTask(c)->mutable_commnet()->set_src_machine_id(0);
  int64_t d = b->Task("d", 1, 0, 10);
  b->Edge(p, c, 1);
  b->Edge(c, d, 1);
  b->plan().mutable_cluster()->mutable_machine(0)->set_cpu_set("0");
  b->plan().mutable_cluster()->mutable_machine(1)->set_cpu_set("1");
}

// A CommNet READ of p's register (machine 0) by machine 1. Every event
// that crosses machines (the "produced" message, the READ's request, its
// data) waits for the receiving machine's transport poller while compute
// holds that machine's core: by the calibrated delay W, or until the
// compute lets go of the core when that comes first. Bytes 0, no link: the
// READ itself takes no time.
TEST(SimulatorTest, ABusyCoreDelaysTheTransportByTheCalibratedWakeUp) {
  auto read_of = [](bool producer_busy, double wakeup_us) {
    PlanBuilder b(2);
    ReadPlanWithHog(&b, producer_busy);
    Calibration cal = b.MakeCalibration();
    cal.mutable_runtime()->set_busy_core_wakeup_us(wakeup_us);
    SimOptions options;
    options.record_timeline = true;
    StatusOr<SimResult> r = SimulatePlan(b.plan(), cal, options);
    EXPECT_TRUE(r.ok()) << r.status();
    for (const SimEvent& e : r->timeline) {
      if (e.category == "read" && e.iteration == 0) return std::make_pair(e.begin_us, e.end_us);
    }
    ADD_FAILURE() << "no READ in the timeline";
    return std::make_pair(-1.0, -1.0);
  };
  using Span = std::pair<double, double>;
  // The producer's core computes hog (100 to 1100, then it waits for p's
  // next register) when the request comes.
  EXPECT_EQ(read_of(true, 0), Span(100, 100));
  EXPECT_EQ(read_of(true, 300), Span(100, 400));
  EXPECT_EQ(read_of(true, 2000), Span(100, 1100));  // the core is free first
  // The reader's core computes hog, a source that acts back to back (0 to
  // 1000, 1000 to 2000, ...): its poller sees p's "produced" message late,
  // so the READ starts late, and the data late again; an act's end does
  // not free the core, so the whole delay applies each time.
  EXPECT_EQ(read_of(false, 300), Span(400, 700));
  EXPECT_EQ(read_of(false, 2000), Span(2100, 4100));
}

// A message received over the transport costs the receiving machine's
// cores busy_message_us of compute (TransportCost.busy_message_us): a READ
// charges its producer (the request) and its reader (the data). The flow
// does not wait for it; a computing core shares itself with it, so an act
// running then ends that much later.
TEST(SimulatorTest, MessagesCostTheReceivingCoresTheCalibratedBusyMessageTime) {
  // Returns the ends of p's second act (on the producer's core) and of
  // hog's first (on the reader's).
  auto ends = [](double message_us) {
    PlanBuilder b(2);
    ReadPlanWithHog(&b, /*producer_busy=*/false);
    Calibration cal = b.MakeCalibration();
    TransportCost* tcp = cal.add_transport();
    tcp->set_name("tcp");
    tcp->set_busy_message_us(message_us);
    SimOptions options;
    options.record_timeline = true;
    StatusOr<SimResult> r = SimulatePlan(b.plan(), cal, options);
    EXPECT_TRUE(r.ok()) << r.status();
    double p_end = -1, hog_end = -1;
    for (const SimEvent& e : r->timeline) {
      if (e.category != "act") continue;
      if (e.name.find("p") == 0 && e.iteration == 1) p_end = e.end_us;
      if (e.name.find("hog") == 0 && e.iteration == 0) hog_end = e.end_us;
    }
    return std::make_pair(p_end, hog_end);
  };
  using Ends = std::pair<double, double>;
  // p's second act (from 100) shares the producer's core with the request
  // of the READ that starts then: 100 + 100 + 50. Hog's first act (from 0)
  // shares the reader's core with all 10 iterations of d (10 us each) and
  // of the READs' data messages (50 us each): 1000 + 10 x (10 + 50).
  EXPECT_EQ(ends(0), Ends(200, 1100));
  EXPECT_EQ(ends(50), Ends(250, 1600));
}

// The pieces one rank receives per collective, what busy_message_us is
// charged for.
TEST(SimulatorTest, CollectiveTrafficCountsThePiecesARankReceives) {
  EXPECT_EQ(TrafficOf(COLLECTIVE_RING_ALL_REDUCE, 4, 1 << 20, 0).messages_received_per_rank, 6);
  EXPECT_EQ(TrafficOf(COLLECTIVE_RING_ALL_GATHER, 4, 1 << 20, 0).messages_received_per_rank, 3);
  EXPECT_EQ(TrafficOf(COLLECTIVE_EXCHANGE_ALL_REDUCE, 4, 1 << 20, 0).messages_received_per_rank,
            3);
  EXPECT_EQ(TrafficOf(COLLECTIVE_DOUBLING_ALL_REDUCE, 4, 1 << 20, 0).messages_received_per_rank,
            2);
  EXPECT_EQ(
      TrafficOf(COLLECTIVE_SCATTER_GATHER_ALL_REDUCE, 4, 1 << 20, 0).messages_received_per_rank,
      6);
  EXPECT_EQ(TrafficOf(COLLECTIVE_RING_ALL_REDUCE, 1, 1 << 20, 0).messages_received_per_rank, 0);
}

TEST(SimulatorTest, SameInputsSameOutput) {
  PlanBuilder b(4);
  RingPlan(b, 4, 123457, COLLECTIVE_RING_ALL_REDUCE);
  SimOptions options;
  options.record_timeline = true;
  SimResult r1 = Simulate(b, 0.5, 0.25, options);
  SimResult r2 = Simulate(b, 0.5, 0.25, options);
  EXPECT_EQ(SimResultJson(r1), SimResultJson(r2));
  EXPECT_EQ(SimChromeTrace(r1), SimChromeTrace(r2));
  EXPECT_NE(SimChromeTrace(r1).find("\"predicted\": true"), std::string::npos);
}

TEST(SimulatorTest, MissingKernelTimesAreCountedAndNamed) {
  PlanBuilder b;
  b.Task("a", 0, 0, 10);
  Calibration empty;
  empty.set_version(1);
  StatusOr<SimResult> r = SimulatePlan(b.plan(), empty, SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kernels_missing, 1);
  ASSERT_FALSE(r->notes.empty());
  EXPECT_NE(r->notes[0].find("work_a"), std::string::npos) << r->notes[0];
}

TEST(SimulatorTest, ADeadlockedPlanIsAnErrorNamingTheWaitingTask) {
  PlanBuilder b;
  int64_t a = b.Task("a", 0, 0, 10);
  int64_t c = b.Task("b", 0, 0, 10);
  b.Edge(a, c);
  b.Edge(c, a);  // a cycle: neither ever acts
  StatusOr<SimResult> r = SimulatePlan(b.plan(), b.MakeCalibration(), SimOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("task 'a'"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace cost
}  // namespace oflite
