// Gradient buckets in compiled plans (gradient_buckets.h): which all-reduces
// are fused, in what order, within which bound, what the fused task records,
// and that a plan where nothing fuses is exactly the plan without the pass.
#include "oneflow_lite/compiler/gradient_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace compiler {
namespace {

Plan MustCompile(const MlpSpec& spec, int machines, int64_t fuse_max_bytes) {
  StatusOr<Job> job = BuildMlpJob(spec);
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return Plan();
  CompileOptions options;
  options.fuse_max_bytes = fuse_max_bytes;
  StatusOr<Plan> plan = Compile(*job, MakeCluster(machines, 1), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : Plan();
}

MlpSpec DataParallel(int machines) {
  MlpSpec spec;  // 16 -> 32 -> 4: gradients of 2 KiB, 128 B, 512 B, 16 B
  spec.batch = 4 * machines;
  spec.placement = "0-" + std::to_string(machines - 1) + ":cpu:0";
  return spec;
}

std::vector<const TaskProto*> Collectives(const Plan& plan, int64_t machine) {
  std::vector<const TaskProto*> tasks;
  for (const TaskProto& t : plan.machine(machine).task()) {
    if (t.type() == TASK_COLLECTIVE) tasks.push_back(&t);
  }
  return tasks;
}

std::vector<const TaskProto*> Buckets(const Plan& plan, int64_t machine) {
  std::vector<const TaskProto*> buckets;
  for (const TaskProto* t : Collectives(plan, machine)) {
    if (t->collective().member_size() > 0) buckets.push_back(t);
  }
  return buckets;
}

const RegstDescProto* Produced(const TaskProto& task, int64_t regst_desc_id) {
  for (const RegstDescProto& r : task.produced()) {
    if (r.regst_desc_id() == regst_desc_id) return &r;
  }
  return nullptr;
}

// The names of the tasks consuming the reduced `lbn` on `machine`, and its
// regst_num, wherever the plan produces it (a collective or a bucket).
std::pair<std::set<std::string>, int> ConsumersOf(const Plan& plan, int64_t machine,
                                                  const std::string& lbn) {
  std::map<int64_t, std::string> names;
  for (const TaskProto& t : plan.machine(machine).task()) names[t.task_id()] = t.name();
  for (const TaskProto* t : Collectives(plan, machine)) {
    for (const RegstDescProto& r : t->produced()) {
      if (r.blob_size() != 1 || r.blob(0).lbn() != lbn) continue;
      std::set<std::string> consumers;
      for (int64_t id : r.consumer_task_id()) consumers.insert(names[id]);
      return {consumers, r.regst_num()};
    }
  }
  return {{}, 0};
}

TEST(GradientBucketsTest, SmallGradientsShareOneCollectiveInBackwardOrder) {
  const Plan fused = MustCompile(DataParallel(2), 2, 64 * 1024);
  const Plan unfused = MustCompile(DataParallel(2), 2, 0);
  const Status memory = CheckMemoryPlan(fused);
  EXPECT_TRUE(memory.ok()) << memory;
  for (int64_t machine = 0; machine < 2; ++machine) {
    SCOPED_TRACE("machine " + std::to_string(machine));
    const std::vector<const TaskProto*> buckets = Buckets(fused, machine);
    ASSERT_EQ(buckets.size(), 1u);
    const TaskProto& bucket = *buckets[0];
    EXPECT_EQ(bucket.name(), "collective:all_reduce:bucket0@" + std::to_string(machine));
    EXPECT_EQ(bucket.collective().algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
    const CollectiveConf& conf = bucket.collective();
    ASSERT_EQ(conf.member_size(), 4);
    // The last layer's gradients are produced first in backward.
    EXPECT_EQ(conf.member(0).lbn().rfind("dense_1-", 0), 0u) << conf.member(0).lbn();
    EXPECT_EQ(conf.member(3).lbn().rfind("dense-", 0), 0u) << conf.member(3).lbn();
    int64_t offset = 0;
    for (int m = 0; m < conf.member_size(); ++m) {
      const CollectiveMember& member = conf.member(m);
      EXPECT_EQ(member.element_offset(), offset) << member.lbn();
      offset += TensorDesc(member.logical_desc()).shape.elem_count();
      EXPECT_EQ(bucket.boxing().in_regst_desc_id(m), member.in_regst_desc_id());
      const RegstDescProto* out = Produced(bucket, member.out_regst_desc_id());
      ASSERT_NE(out, nullptr) << member.lbn();
      EXPECT_EQ(out->blob(0).lbn(), member.lbn());
      // Same consumers and back-pressure bound as the unfused collective's.
      const auto want = ConsumersOf(unfused, machine, member.lbn());
      EXPECT_FALSE(want.first.empty()) << member.lbn();
      EXPECT_EQ(ConsumersOf(fused, machine, member.lbn()), want) << member.lbn();
    }
    EXPECT_EQ(TensorDesc(bucket.boxing().logical_desc()), TensorDesc(Shape{offset}, DT_FLOAT));
    EXPECT_EQ(conf.element_count(), offset);
    EXPECT_EQ(conf.buffer_bytes(), offset * 4);
    EXPECT_EQ(bucket.boxing().lbn(), "bucket0");
    EXPECT_EQ(Collectives(fused, machine).size(), Collectives(unfused, machine).size() - 3);
  }
}

// Every bucket stays within the bound; an all-reduce above it stays alone.
TEST(GradientBucketsTest, BucketsStayWithinTheirBound) {
  const int64_t bound = 600;  // the 16 B, 128 B and 512 B gradients: 656 B together
  const Plan fused = MustCompile(DataParallel(3), 3, bound);
  const Plan unfused = MustCompile(DataParallel(3), 3, 0);
  const std::vector<const TaskProto*> buckets = Buckets(fused, 1);
  ASSERT_EQ(buckets.size(), 1u);
  int members = 0;
  for (const TaskProto* bucket : buckets) {
    EXPECT_LE(bucket->collective().buffer_bytes(), bound) << bucket->name();
    members += bucket->collective().member_size();
  }
  EXPECT_EQ(members, 2);
  for (const TaskProto* t : Collectives(fused, 1)) {
    if (t->collective().member_size() > 0) continue;
    const int64_t bytes = TensorDesc(t->boxing().logical_desc()).ByteSize();
    if (t->boxing().kind() == BOXING_ALL_REDUCE) {
      EXPECT_TRUE(bytes > bound || bytes == 128) << t->name() << ": " << bytes;
    }
  }
  EXPECT_EQ(Collectives(fused, 1).size(), Collectives(unfused, 1).size() - members + 1);
}

// With nothing to fuse (every gradient above the bound, or one machine),
// the pass leaves the plan byte for byte as without it.
TEST(GradientBucketsTest, NothingToFuseLeavesThePlanAsWithoutThePass) {
  EXPECT_EQ(MustCompile(DataParallel(2), 2, 8).SerializeAsString(),
            MustCompile(DataParallel(2), 2, 0).SerializeAsString());
  MlpSpec one = DataParallel(1);
  one.placement = "0:cpu:0";
  EXPECT_EQ(MustCompile(one, 1, 64 * 1024).SerializeAsString(),
            MustCompile(one, 1, 0).SerializeAsString());
  EXPECT_TRUE(Buckets(MustCompile(DataParallel(2), 2, 8), 0).empty());
}

// A task graph built by hand: compute tasks and P -> B rings over 2
// machines.
class GraphMaker {
 public:
  int Task(TaskType type, int64_t machine, const std::string& name) {
    TaskNode t;
    t.index = static_cast<int>(g.tasks.size());
    t.type = type;
    t.name = name;
    t.device = {machine, DEVICE_CPU, 0};
    t.stream = type == TASK_COLLECTIVE ? kCollectiveStream : kComputeStream;
    g.tasks.push_back(t);
    return t.index;
  }
  int Regst(int producer, const std::string& lbn) {
    const TensorDesc desc = DescOf(lbn);
    RegstNode r;
    r.id = static_cast<int>(g.regsts.size());
    r.name = "out";
    r.producer = producer;
    BlobInRegst* blob = &r.blobs.emplace_back();
    blob->set_lbn(lbn);
    *blob->mutable_desc() = desc.ToProto();
    blob->set_bytes(desc.ByteSize());
    g.regsts.push_back(r);
    g.tasks[producer].produced.push_back(r.id);
    return r.id;
  }
  void Consume(int task, int regst) {
    g.regsts[regst].consumers.push_back(task);
    g.tasks[task].consumed.push_back({"in", {regst}});
  }
  // Compute tasks on each machine producing `lbn`, consuming `inputs` (one
  // per machine, or none); returns their registers.
  std::vector<int> Compute(const std::string& lbn, const std::vector<int>& inputs) {
    std::vector<int> out;
    for (int64_t m = 0; m < 2; ++m) {
      const int task = Task(TASK_COMPUTE, m, lbn + "@" + std::to_string(m));
      if (!inputs.empty()) Consume(task, inputs[m]);
      out.push_back(Regst(task, lbn));
    }
    return out;
  }
  // A P -> B ring over `parts`; returns its outputs.
  std::vector<int> AllReduce(const std::string& lbn, const std::vector<int>& parts) {
    std::vector<int> ring, out;
    for (int64_t m = 0; m < 2; ++m) {
      const int task = Task(TASK_COLLECTIVE, m, "collective:all_reduce:" + lbn);
      BoxingConf& b = g.tasks[task].boxing;
      b.set_kind(BOXING_ALL_REDUCE);
      b.set_lbn(lbn);
      b.mutable_in_sbp()->add_sbp()->set_partial_sum(true);
      b.mutable_out_sbp()->add_sbp()->set_broadcast(true);
      *b.mutable_logical_desc() = DescOf(lbn).ToProto();
      b.set_ring_rank(m);
      b.add_in_regst_desc_id(parts[m]);
      b.add_in_parallel_id(m);
      Consume(task, parts[m]);
      out.push_back(Regst(task, lbn));
      ring.push_back(task);
    }
    for (int task : ring) g.tasks[task].ring_tasks = ring;
    return out;
  }

  // 4 floats (16 B), unless `elements` says otherwise for the lbn.
  TensorDesc DescOf(const std::string& lbn) const {
    const auto it = elements.find(lbn);
    return TensorDesc{Shape{it == elements.end() ? 4 : it->second}, DT_FLOAT};
  }

  // Collective tasks per boxing lbn (a bucket's is "bucketB").
  std::map<std::string, int> CollectivesByLbn() const {
    std::map<std::string, int> collectives;
    for (const TaskNode& t : g.tasks) {
      if (t.type == TASK_COLLECTIVE) ++collectives[t.boxing.lbn()];
    }
    return collectives;
  }
  // The member lbns of each task of bucket `lbn`, in its order.
  std::vector<std::vector<std::string>> MembersOf(const std::string& lbn) const {
    std::vector<std::vector<std::string>> members;
    for (const TaskNode& t : g.tasks) {
      if (t.type != TASK_COLLECTIVE || t.boxing.lbn() != lbn) continue;
      members.emplace_back();
      for (const auto& member : t.bucket) members.back().push_back(member.lbn());
    }
    return members;
  }

  std::map<std::string, int64_t> elements;
  TaskGraph g;
};

// Ring B waits for ring A (A's output feeds the compute B reduces), ring C
// for neither: A and C share a bucket, B stays alone (fusing A and B would
// deadlock: the fused task would wait for its own output).
TEST(GradientBucketsTest, DependentAllReducesAreNeverFused) {
  GraphMaker maker;
  const std::vector<int> a = maker.AllReduce("a", maker.Compute("a", {}));
  maker.AllReduce("b", maker.Compute("b", a));
  maker.AllReduce("c", maker.Compute("c", {}));
  StatusOr<BucketStats> stats = FuseAllReduceBuckets(&maker.g, 1024, 2);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->buckets, 1);
  EXPECT_EQ(stats->members, 2);
  EXPECT_EQ(maker.MembersOf("bucket0"),
            (std::vector<std::vector<std::string>>{{"a", "c"}, {"a", "c"}}));
  for (const TaskNode& t : maker.g.tasks) {
    EXPECT_EQ(t.index, &t - maker.g.tasks.data());
    if (t.type != TASK_COLLECTIVE || t.boxing.lbn() != "bucket0") continue;
    EXPECT_EQ(t.produced.size(), 2u);
    for (int regst : t.produced) EXPECT_EQ(maker.g.regsts[regst].producer, t.index);
  }
  EXPECT_EQ(maker.CollectivesByLbn(), (std::map<std::string, int>{{"b", 2}, {"bucket0", 2}}));
  for (const RegstNode& r : maker.g.regsts) {
    ASSERT_GE(r.producer, 0);
    ASSERT_LT(r.producer, static_cast<int>(maker.g.tasks.size()));
    for (int c : r.consumers) {
      ASSERT_LT(c, static_cast<int>(maker.g.tasks.size()));
      const auto& consumed = maker.g.tasks[c].consumed;
      bool found = false;
      for (const auto& [name, ids] : consumed) {
        found = found || std::find(ids.begin(), ids.end(), r.id) != ids.end();
      }
      EXPECT_TRUE(found) << "register " << r.id << " consumer " << maker.g.tasks[c].name;
    }
  }
}

// A gradient that fills a bucket by itself (a weight at the bound) between
// two small ones (its layer's biases) does not close the bucket the small
// ones collect in: "s1" and "s2" share one collective, "w" stays alone.
TEST(GradientBucketsTest, AFullGradientLeavesTheOpenBucketOpen) {
  GraphMaker maker;
  maker.elements["w"] = 8;  // 32 B, the bound
  maker.AllReduce("s1", maker.Compute("s1", {}));
  maker.AllReduce("w", maker.Compute("w", {}));
  maker.AllReduce("s2", maker.Compute("s2", {}));
  StatusOr<BucketStats> stats = FuseAllReduceBuckets(&maker.g, 32, 2);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->buckets, 1);
  EXPECT_EQ(stats->members, 2);
  EXPECT_EQ(maker.MembersOf("bucket0"),
            (std::vector<std::vector<std::string>>{{"s1", "s2"}, {"s1", "s2"}}));
  EXPECT_EQ(maker.CollectivesByLbn(), (std::map<std::string, int>{{"w", 2}, {"bucket0", 2}}));
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
