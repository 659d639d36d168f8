// The verifier accepts every real compiled plan, and each class of damage,
// made by mutating a real compiled plan, is refused with an InvalidArgument
// naming the task (name and id) and the field.
#include "oneflow_lite/plan/plan_verifier.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/plan/testing/plan_mutations.h"
#include "oneflow_lite/plan/testing/test_plans.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

using testing::FindTask;

Plan Compiled(const std::string& name) {
  StatusOr<Plan> plan = testing::CompiledTestPlan(name);
  CHECK(plan.ok()) << plan.status();
  return std::move(plan).value();
}

std::string Label(const TaskProto& task) { return testing::TaskLabelForTest(task); }
bool IsMatmul(const TaskProto& task) { return testing::IsMatmulTask(task); }

// Refused as InvalidArgument with every one of `parts` in the message.
void ExpectRefused(const Plan& plan, const std::vector<std::string>& parts) {
  Status status = VerifyPlan(plan);
  ASSERT_FALSE(status.ok()) << "accepted a damaged plan; expected: " << parts[0];
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "'" << part << "' missing from: " << status;
  }
}

TEST(PlanVerifierTest, AcceptsEveryCompiledPlan) {
  StatusOr<std::vector<testing::NamedPlan>> plans = testing::CompiledTestPlans();
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 8u);
  for (const testing::NamedPlan& plan : *plans) {
    Status verified = VerifyPlan(plan.plan);
    EXPECT_TRUE(verified.ok()) << plan.name << ": " << verified;
  }
}

// A GPU's compute stream merged into one graph_replay task (its kernels
// read registers the task itself produces) is a valid plan, also when its
// tasks are rewritten to CPU the way tests run CUDA plans.
TEST(PlanVerifierTest, AcceptsMergedGpuComputeTask) {
  StatusOr<Plan> plan = testing::CompiledMergedGpuPlan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  int replayed = 0;
  for (const TaskProto& t : plan->machine(0).task()) {
    if (!t.graph_replay()) continue;
    ++replayed;
    EXPECT_EQ(t.type(), TASK_COMPUTE);
    EXPECT_GT(t.kernel_size(), 1);
  }
  EXPECT_EQ(replayed, 1);
  Status verified = VerifyPlan(*plan);
  EXPECT_TRUE(verified.ok()) << verified;
  for (MachinePlan& m : *plan->mutable_machine()) {
    for (TaskProto& t : *m.mutable_task()) t.set_device_type(DEVICE_CPU);
  }
  PlanVerifierOptions on_cpu;
  on_cpu.allow_device_type_other_than_id = true;
  verified = VerifyPlan(*plan, on_cpu);
  EXPECT_TRUE(verified.ok()) << verified;
}

// kernel.cc:42 "input b[0] not bound" was reachable from a file.
// The classes of damage issue 12 found reachable from a file (bindings
// dropped, foreign registers written, KernelConfs dropped, offsets outside
// their zone, ids out of range or duplicated, overflow-sized shapes, ...).
// The evaluation plan a training plan carries is verified with it, before
// anything runs; its state must agree with its presence.
TEST(PlanVerifierTest, EvaluationPlanIsVerifiedWithTheTrainingPlan) {
  Plan plan = Compiled("mlp");
  Plan eval = Compiled("mlp");
  *plan.mutable_eval_plan() = eval;
  plan.set_eval_state(EVAL_COMPILED);
  ASSERT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
  TaskProto* matmul = FindTask(plan.mutable_eval_plan(), IsMatmul);
  ASSERT_NE(matmul, nullptr);
  const std::string label = Label(*matmul);
  matmul->mutable_kernel(0)->mutable_input()->erase(
      matmul->mutable_kernel(0)->mutable_input()->begin());
  ExpectRefused(plan, {"evaluation plan (eval_plan)", label, "kernel[0]"});

  Plan missing = Compiled("mlp");
  missing.set_eval_state(EVAL_COMPILED);
  ExpectRefused(missing, {"plan.eval_state", "EVAL_COMPILED", "carries no evaluation plan"});

  Plan nested = Compiled("mlp");
  *nested.mutable_eval_plan() = eval;
  nested.set_eval_state(EVAL_COMPILED);
  *nested.mutable_eval_plan()->mutable_eval_plan() = eval;
  nested.mutable_eval_plan()->set_eval_state(EVAL_COMPILED);
  ExpectRefused(nested, {"an evaluation plan carries no evaluation plan"});

  Plan negative = Compiled("mlp");
  negative.set_total_iters(-3);
  ExpectRefused(negative, {"total_iters -3 is negative"});
  negative = Compiled("mlp");
  negative.set_samples_per_iter(-1);
  ExpectRefused(negative, {"samples_per_iter -1 is negative"});
}

TEST(PlanVerifierTest, EveryMutationIsRefusedNamingTaskAndField) {
  for (const testing::PlanMutation& mutation : testing::PlanMutations()) {
    SCOPED_TRACE(mutation.name);
    Plan plan = Compiled(mutation.base);
    const std::vector<std::string> needles = mutation.apply(&plan);
    ASSERT_FALSE(needles.empty()) << "nothing to damage in " << mutation.base;
    ExpectRefused(plan, needles);
  }
}

TEST(PlanVerifierTest, KernelDtypeOtherThanItsBlobsIsRefused) {
  Plan plan = Compiled("data_parallel");
  TaskProto* task = FindTask(&plan, IsMatmul);
  ASSERT_NE(task, nullptr);
  task->mutable_kernel(0)->set_dtype(DT_DOUBLE);
  ExpectRefused(plan, {Label(*task), "kernel[0]", ".dtype", "float64 but its first blob"});
}

// On several devices shapes are not inferred, but dtypes are: a float
// matmul fed an int8 blob would read past it.
TEST(PlanVerifierTest, InputOfAnotherDtypeOnSeveralDevicesIsRefused) {
  Plan plan = Compiled("data_parallel");
  TaskProto* task = FindTask(&plan, IsMatmul);
  ASSERT_NE(task, nullptr);
  ASSERT_EQ(task->parallel_ctx().parallel_num(), 2);
  const BlobBinding& b = task->kernel(0).input(1);
  TaskProto* producer = FindTask(&plan, [&](const TaskProto& t) {
    for (const RegstDescProto& r : t.produced()) {
      if (r.regst_desc_id() == b.regst_desc_id()) return true;
    }
    return false;
  });
  for (RegstDescProto& r : *producer->mutable_produced()) {
    if (r.regst_desc_id() == b.regst_desc_id()) {
      r.mutable_blob(b.blob_index())->mutable_desc()->set_dtype(DT_INT8);
    }
  }
  // Refused at the first task that reads or writes the blob as float.
  ExpectRefused(plan, {"kernel[0]", "int8"});
}

// Found by plan_fuzz_test under --config=ubsan: a float body at an odd
// offset made the elementwise kernels load misaligned floats.
TEST(PlanVerifierTest, MisalignedBlobIsRefused) {
  Plan plan = Compiled("mlp");
  TaskProto* task = FindTask(&plan, IsMatmul);
  ASSERT_NE(task, nullptr);
  // One row less, so that the body still fits at offset 1.
  BlobInRegst* blob = task->mutable_produced(0)->mutable_blob(0);
  ShapeProto* shape = blob->mutable_desc()->mutable_shape();
  shape->set_dim(0, shape->dim(0) - 1);
  blob->set_bytes(shape->dim(0) * shape->dim(1) * 4);
  blob->set_offset(1);
  ExpectRefused(plan, {Label(*task), "produced[0]", ".blob[0].offset", "is not aligned to its "
                       "4-byte elements"});
}

TEST(PlanVerifierTest, DeviceOutsideTheClusterIsRefused) {
  Plan plan = Compiled("data_parallel");
  plan.mutable_cluster()->mutable_machine(0)->set_cpu_devices(1);
  TaskProto* task = FindTask(&plan, [](const TaskProto& t) { return t.device_index() == 1; });
  ASSERT_NE(task, nullptr);
  ExpectRefused(plan, {Label(*task), "device_index", "cpu:1 does not exist on machine 0"});
}

TEST(PlanVerifierTest, RegstNumOutOfRangeIsRefused) {
  for (const int32_t copies : {0, -1, kMaxRegstNum + 1}) {
    Plan plan = Compiled("mlp");
    TaskProto* task = FindTask(&plan, IsMatmul);
    task->mutable_produced(0)->set_regst_num(copies);
    ExpectRefused(plan, {Label(*task), "produced[0]", ".regst_num"});
  }
}

TEST(PlanVerifierTest, ProducerIdOfAnotherTaskIsRefused) {
  Plan plan = Compiled("mlp");
  TaskProto* task = FindTask(&plan, IsMatmul);
  task->mutable_produced(0)->set_producer_task_id(task->task_id() + 1);
  ExpectRefused(plan, {Label(*task), ".producer_task_id", "not this task"});
}

TEST(PlanVerifierTest, ConsumedRegisterNotListingTheConsumerIsRefused) {
  Plan plan = Compiled("mlp");
  TaskProto* task = FindTask(&plan, IsMatmul);
  const int64_t input = task->consumed(0).regst_desc_id(0);
  // The producer forgets this consumer.
  TaskProto* producer = FindTask(&plan, [&](const TaskProto& t) {
    for (const RegstDescProto& r : t.produced()) {
      if (r.regst_desc_id() == input) return true;
    }
    return false;
  });
  for (RegstDescProto& r : *producer->mutable_produced()) {
    if (r.regst_desc_id() == input) r.clear_consumer_task_id();
  }
  ExpectRefused(plan, {Label(*task), "consumed[0]", "does not list this task as a consumer"});
}

TEST(PlanVerifierTest, BindingToAMissingBlobIsRefused) {
  Plan plan = Compiled("mlp");
  TaskProto* task = FindTask(&plan, IsMatmul);
  task->mutable_kernel(0)->mutable_input(0)->set_blob_index(3);
  ExpectRefused(plan, {Label(*task), "kernel[0]", ".input[0]", "no blob 3 in register"});
}

TEST(PlanVerifierTest, OverlappingRegistersWithoutReuseAreRefused) {
  Plan plan = Compiled("mlp");
  TaskProto* task = FindTask(&plan, IsMatmul);
  const int64_t input = task->kernel(0).input(0).regst_desc_id();
  TaskProto* producer = FindTask(&plan, [&](const TaskProto& t) {
    return !t.produced().empty() && t.produced(0).regst_desc_id() == input;
  });
  ASSERT_NE(producer, nullptr);
  RegstDescProto* regst = task->mutable_produced(0);
  regst->set_memory_reused(false);
  regst->set_mem_offset(0, producer->produced(0).mem_offset(0));
  ExpectRefused(plan, {".mem_offset", "overlaps register", "without memory_reused on both"});
}

TEST(PlanVerifierTest, BoxingPartOutOfRangeIsRefused) {
  Plan plan = Compiled("data_parallel");
  TaskProto* boxing = FindTask(&plan, [](const TaskProto& t) { return t.type() == TASK_BOXING; });
  ASSERT_NE(boxing, nullptr);
  boxing->mutable_boxing()->set_out_parallel_id(boxing->boxing().parallel_num());
  ExpectRefused(plan, {Label(*boxing), "boxing.out_parallel_id"});
}

TEST(PlanVerifierTest, BoxingLogicalDescLargerThanItsPartsIsRefused) {
  Plan plan = Compiled("data_parallel");
  TaskProto* boxing = FindTask(&plan, [](const TaskProto& t) { return t.type() == TASK_BOXING; });
  ASSERT_NE(boxing, nullptr);
  boxing->mutable_boxing()->mutable_logical_desc()->mutable_shape()->set_dim(0, 1 << 30);
  ExpectRefused(plan, {Label(*boxing), "boxing.logical_desc", "is larger than its parts"});
}

TEST(PlanVerifierTest, BoxingPartOfAnotherDtypeIsRefused) {
  Plan plan = Compiled("data_parallel");
  TaskProto* boxing = FindTask(&plan, [](const TaskProto& t) { return t.type() == TASK_BOXING; });
  ASSERT_NE(boxing, nullptr);
  boxing->mutable_boxing()->mutable_logical_desc()->set_dtype(DT_INT8);
  ExpectRefused(plan, {Label(*boxing), "boxing.in_regst_desc_id[0]",
                       "holds float32, the logical "
                       "blob int8"});
}

TEST(PlanVerifierTest, TaskDeviceDisagreeingWithItsIdIsRefusedUnlessAllowed) {
  Plan plan = Compiled("mlp");
  TaskProto* task = FindTask(&plan, IsMatmul);
  task->set_device_type(DEVICE_CUDA);
  ExpectRefused(plan, {Label(*task), "device_type/device_index", "disagree with the task id"});
  PlanVerifierOptions options;
  options.allow_device_type_other_than_id = true;
  // Then the cluster still bounds the device: machine 0 has no GPU.
  Status status = VerifyPlan(plan, options);
  EXPECT_NE(status.message().find("cuda:0 does not exist"), std::string::npos) << status;
}

TEST(PlanVerifierTest, CommNetCopyOfTheRemoteRegisterMustMatch) {
  Plan plan = Compiled("machine_pipeline");
  TaskProto* commnet = FindTask(&plan, [](const TaskProto& t) { return t.type() == TASK_COMMNET; });
  ASSERT_NE(commnet, nullptr);
  commnet->mutable_commnet()->mutable_src_regst()->set_bytes_per_regst(1 << 20);
  ExpectRefused(plan, {Label(*commnet), "commnet.src_regst", "differs from register"});
}

TEST(PlanVerifierTest, ComputeTaskReadingAnotherMachineIsRefused) {
  Plan plan = Compiled("machine_pipeline");
  TaskProto* commnet = FindTask(&plan, [](const TaskProto& t) { return t.type() == TASK_COMMNET; });
  ASSERT_NE(commnet, nullptr);
  commnet->set_type(TASK_COMPUTE);
  ExpectRefused(plan, {Label(*commnet), "consumed[0]", "only CommNet tasks read other machines"});
}

TEST(PlanVerifierTest, RingThatDoesNotHoldTheTaskIsRefused) {
  Plan plan = Compiled("two_machines");
  TaskProto* ring = FindTask(&plan, [](const TaskProto& t) { return t.type() == TASK_COLLECTIVE; });
  ASSERT_NE(ring, nullptr);
  ring->mutable_boxing()->set_ring_rank(ring->boxing().ring_rank() == 0 ? 1 : 0);
  ExpectRefused(plan, {Label(*ring), "boxing.ring_rank", "does not hold this task"});
}

// An uneven split: 10 classes column-split over 3 machines gives the last
// weight parts of 4, 3 and 3 columns, so a ring's parts differ in size and
// the bound on its logical blob is their sum, not n times this task's part
// (this once refused every tensor-parallel plan whose split was uneven).
TEST(PlanVerifierTest, RingOfUnevenPartsIsAcceptedAndStillBounded) {
  compiler::MlpSpec spec;
  spec.batch = 6;
  spec.classes = 10;
  spec.placement = "0-2:cpu:0";
  spec.model_parallel = compiler::ModelParallel::kSplitColumns;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> compiled = compiler::Compile(*job, compiler::MakeCluster(3, 1));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  Plan plan = std::move(compiled).value();
  ASSERT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
  // Find a ring whose members' input parts differ in size.
  std::map<int64_t, int64_t> part_bytes;  // regst id -> bytes
  for (const auto& machine : plan.machine()) {
    for (const auto& task : machine.task()) {
      for (const auto& regst : task.produced()) {
        if (regst.blob_size() > 0) {
          part_bytes[regst.regst_desc_id()] = TensorDesc(regst.blob(0).desc()).ByteSize();
        }
      }
    }
  }
  TaskProto* uneven = FindTask(&plan, [&](const TaskProto& t) {
    if (t.type() != TASK_COLLECTIVE || t.boxing().in_regst_desc_id_size() != 1) return false;
    const int64_t own = part_bytes[t.boxing().in_regst_desc_id(0)];
    return own * t.boxing().ring_task_id_size() <
           TensorDesc(t.boxing().logical_desc()).ByteSize();
  });
  ASSERT_NE(uneven, nullptr) << "no ring with a part smaller than an even share";
  uneven->mutable_boxing()->mutable_logical_desc()->mutable_shape()->set_dim(0, 1 << 20);
  ExpectRefused(plan, {Label(*uneven), "boxing.logical_desc", "larger than the ring's parts"});
}

TEST(PlanVerifierTest, RingLogicalBlobLargerThanItsPartsIsRefused) {
  Plan plan = Compiled("two_machines");
  TaskProto* ring = FindTask(&plan, [](const TaskProto& t) { return t.type() == TASK_COLLECTIVE; });
  ASSERT_NE(ring, nullptr);
  ring->mutable_boxing()->mutable_logical_desc()->mutable_shape()->set_dim(0, 1 << 30);
  ExpectRefused(plan, {Label(*ring), "boxing.logical_desc", "larger than the ring's parts"});
}

// Gradient buckets (CollectiveConf.member): the compiled two-machine MLP
// fuses its 4 gradient all-reduces into one bucket; each damage to it is
// refused naming the task and the field.
TEST(PlanVerifierTest, MalformedBucketIsRefused) {
  struct Case {
    const char* what;
    std::function<void(TaskProto*)> damage;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {"gap between members",
       [](TaskProto* t) {
         CollectiveMember* m = t->mutable_collective()->mutable_member(1);
         m->set_element_offset(m->element_offset() + 1);
       },
       {"collective.member[1].element_offset", "members before it end at element"}},
      {"parts in another order",
       [](TaskProto* t) {
         CollectiveConf* c = t->mutable_collective();
         const int64_t first = c->member(0).in_regst_desc_id();
         c->mutable_member(0)->set_in_regst_desc_id(c->member(1).in_regst_desc_id());
         c->mutable_member(1)->set_in_regst_desc_id(first);
       },
       {"collective.member[0].in_regst_desc_id", "boxing.in_regst_desc_id[0] is"}},
      {"two members write one output",
       [](TaskProto* t) {
         CollectiveConf* c = t->mutable_collective();
         c->mutable_member(1)->set_out_regst_desc_id(c->member(0).out_regst_desc_id());
       },
       {"collective.member[1].out_regst_desc_id", "another member's output"}},
      {"member of another dtype",
       [](TaskProto* t) {
         t->mutable_collective()->mutable_member(2)->mutable_logical_desc()->set_dtype(DT_INT32);
       },
       {"collective.member[2].logical_desc", "not a static tensor of the bucket's float32"}},
      {"member split on an axis it lacks",
       [](TaskProto* t) {
         t->mutable_collective()->mutable_member(0)->mutable_out_sbp()->set_split_axis(7);
       },
       {"collective.member[0].in_sbp", "P -> B, or on a flat ring P -> S(a) or S(a) -> B"}},
      {"member gathered and scattered",
       [](TaskProto* t) {
         CollectiveMember* m = t->mutable_collective()->mutable_member(0);
         m->mutable_in_sbp()->set_split_axis(0);
         m->mutable_out_sbp()->set_split_axis(0);
       },
       {"collective.member[0].in_sbp", "P -> B, or on a flat ring"}},
      {"member scattered with a whole output",
       // A P -> S member's output is this rank's rows, not the whole tensor.
       [](TaskProto* t) {
         t->mutable_collective()->mutable_member(0)->mutable_out_sbp()->set_split_axis(0);
       },
       {"collective.member[0].out_regst_desc_id", "does not hold one blob of"}},
      {"member gathered from a whole part",
       [](TaskProto* t) {
         t->mutable_collective()->mutable_member(0)->mutable_in_sbp()->set_split_axis(0);
       },
       {"collective.member[0].in_regst_desc_id", "does not hold one blob of"}},
      {"bucket all-gathered",
       [](TaskProto* t) { t->mutable_collective()->set_algorithm(COLLECTIVE_RING_ALL_GATHER); },
       {"collective.algorithm", "a bucket runs an all-reduce, not COLLECTIVE_RING_ALL_GATHER"}},
      {"bucket of one",
       [](TaskProto* t) {
         auto* members = t->mutable_collective()->mutable_member();
         members->erase(members->begin() + 1, members->end());
       },
       {"collective.member", "2 or more P -> B all-reduces, not 1"}},
      {"logical tensor longer than its members",
       [](TaskProto* t) {
         ShapeProto* shape = t->mutable_boxing()->mutable_logical_desc()->mutable_shape();
         shape->set_dim(0, shape->dim(0) + 1);
       },
       {"boxing.logical_desc", "for members of"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Plan plan = Compiled("two_machines");
    TaskProto* bucket = FindTask(&plan, [](const TaskProto& t) {
      return t.type() == TASK_COLLECTIVE && t.collective().member_size() > 0;
    });
    ASSERT_NE(bucket, nullptr);
    ASSERT_EQ(bucket->collective().member_size(), 4);
    c.damage(bucket);
    std::vector<std::string> expect = {Label(*bucket)};
    expect.insert(expect.end(), c.expect.begin(), c.expect.end());
    ExpectRefused(plan, expect);
  }
}

TEST(PlanVerifierTest, SinkMetricNamingNoConsumedRegisterIsRefused) {
  Plan plan = Compiled("mlp");
  TaskProto* sink = FindTask(&plan, [](const TaskProto& t) { return t.type() == TASK_SINK; });
  ASSERT_NE(sink, nullptr);
  ASSERT_GT(sink->sink().metric_size(), 0);
  sink->mutable_sink()->mutable_metric(0)->set_consumed_name("nothing");
  ExpectRefused(plan, {Label(*sink), "sink.metric[0].consumed_name"});
}

TEST(PlanVerifierTest, InvalidEnumsAreRefused) {
  Plan plan = Compiled("mlp");
  TaskProto* task = FindTask(&plan, IsMatmul);
  task->mutable_kernel(0)->set_dtype(static_cast<DataType>(77));
  ExpectRefused(plan, {Label(*task), "kernel[0]", ".dtype", "77 is not a data type"});
  plan = Compiled("mlp");
  task = FindTask(&plan, IsMatmul);
  task->mutable_produced(0)->mutable_blob(0)->mutable_desc()->set_dtype(static_cast<DataType>(99));
  ExpectRefused(plan, {Label(*task), ".blob[0].desc", "dtype 99 is not a data type"});
}

// consumer_sync (docs/runtime.md, "Stream order"): a compiled plan marks
// every edge; an edge that crosses a stream or the host marked
// EDGE_STREAM_ORDER would let a consumer read before the data is there.
TEST(PlanVerifierTest, StreamOrderOnAnEdgeThatNeedsAnEventIsRefused) {
  Plan plan = Compiled("mlp");
  int stream_ordered = 0;
  TaskProto* crossing = nullptr;
  int crossing_k = -1;
  for (TaskProto& task : *plan.mutable_machine(0)->mutable_task()) {
    for (RegstDescProto& desc : *task.mutable_produced()) {
      ASSERT_EQ(desc.consumer_sync_size(), desc.consumer_task_id_size()) << task.name();
      for (int k = 0; k < desc.consumer_sync_size(); ++k) {
        stream_ordered += desc.consumer_sync(k) == EDGE_STREAM_ORDER ? 1 : 0;
        if (desc.consumer_sync(k) == EDGE_EVENT && crossing == nullptr) {
          crossing = &task;
          crossing_k = k;
        }
      }
    }
  }
  EXPECT_GT(stream_ordered, 0);
  ASSERT_NE(crossing, nullptr);
  for (RegstDescProto& desc : *crossing->mutable_produced()) {
    if (desc.consumer_sync_size() > crossing_k && desc.consumer_sync(crossing_k) == EDGE_EVENT) {
      desc.set_consumer_sync(crossing_k, EDGE_STREAM_ORDER);
      break;
    }
  }
  ExpectRefused(plan, {Label(*crossing), ".consumer_sync[", "needs EDGE_EVENT"});
}

TEST(PlanVerifierTest, ConsumerSyncOfTheWrongLengthOrUnsetIsRefused) {
  Plan plan = Compiled("mlp");
  TaskProto* task = FindTask(&plan, IsMatmul);
  task->mutable_produced(0)->add_consumer_sync(EDGE_EVENT);
  ExpectRefused(plan, {Label(*task), "produced[0]", ".consumer_sync", "entries for"});
  plan = Compiled("mlp");
  task = FindTask(&plan, IsMatmul);
  task->mutable_produced(0)->set_consumer_sync(0, EDGE_SYNC_UNSET);
  ExpectRefused(plan, {Label(*task), ".consumer_sync[0]", "unset"});
  // An old plan without the field stays valid (every edge waits for the event).
  plan = Compiled("mlp");
  for (TaskProto& t : *plan.mutable_machine(0)->mutable_task()) {
    for (RegstDescProto& desc : *t.mutable_produced()) desc.clear_consumer_sync();
  }
  EXPECT_TRUE(VerifyPlan(plan).ok());
}

}  // namespace
}  // namespace oflite
