// ProfilePlanKernels on real compiled plans: every CPU compute and source
// kernel of the plan gets a time under its key, each key once, known keys
// are skipped, and a kernel that cannot be initialized or has no kernel at
// all becomes a note, not a failed profile.
#include "oneflow_lite/profile/kernel_profiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/cost/kernel_key.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/math/gemm_orientation.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/profile/cache_profiler.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace profile {
namespace {

// A kernel whose Init always fails, standing in for a data loader whose
// dataset is missing.
class FailingInitKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    return NotFoundError("op '", ctx.op->name(), "': no such dataset '/nowhere/data.npy'");
  }
  Status Forward(KernelContext* ctx) override { return ctx->Error("Forward without Init"); }
};
REGISTER_KERNEL("profile_test_failing_init", DEVICE_CPU, DT_FLOAT, FailingInitKernel);

// A kernel whose Forward fails on its first timed call (after the warm-up).
class FailingForwardKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    if (++calls_ == KernelProfileOptions().warmup + 2) {
      return ctx->Error("the first timed call fails");
    }
    return Status::OK();
  }

 private:
  int calls_ = 0;
};
REGISTER_KERNEL("profile_test_failing_forward", DEVICE_CPU, DT_FLOAT, FailingForwardKernel);

// A kernel that, like a matmul choosing its GEMM's orientation, takes
// kSlowUs on each of its first GemmOrientation::kSettlingCalls calls and
// next to nothing after them.
class SettlingKernel final : public Kernel {
 public:
  static constexpr int kSlowUs = 20000;
  Status Forward(KernelContext*) override {
    if (calls_++ < math::GemmOrientation::kSettlingCalls) {
      std::this_thread::sleep_for(std::chrono::microseconds(kSlowUs));
    }
    return Status::OK();
  }

 private:
  int calls_ = 0;
};
REGISTER_KERNEL("profile_test_settling", DEVICE_CPU, DT_FLOAT, SettlingKernel);

Plan CompileMlp(const std::string& placement, int cpus) {
  compiler::MlpSpec spec;
  spec.placement = placement;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  CHECK(job.ok()) << job.status();
  StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(1, cpus));
  CHECK(plan.ok()) << plan.status();
  return *std::move(plan);
}

// Every key of the plan's CPU compute and source kernels, with `threads`,
// and how many kernels there are.
std::set<std::string> KeysOf(const Plan& plan, int threads, int* kernels = nullptr) {
  const cost::PlanIndex index(plan);
  std::set<std::string> keys;
  int count = 0;
  for (const TaskProto* task : index.tasks()) {
    if (task->type() != TASK_COMPUTE && task->type() != TASK_SOURCE) continue;
    for (const KernelConf& conf : task->kernel()) {
      StatusOr<std::string> key = cost::KernelKey(conf, DEVICE_CPU, threads, index);
      CHECK(key.ok()) << key.status();
      keys.insert(*key);
      ++count;
    }
  }
  if (kernels != nullptr) *kernels = count;
  return keys;
}

KernelProfileOptions Quick(int threads = 1) {
  KernelProfileOptions options;
  options.threads = threads;
  options.samples = 3;
  options.min_sample_us = 20;
  return options;
}

TEST(KernelProfilerTest, EveryKernelKeyOfAnMlpGetsAPositiveTimeOnce) {
  const Plan plan = CompileMlp("0:cpu:0", 1);
  int kernels = 0;
  const std::set<std::string> keys = KeysOf(plan, 1, &kernels);
  ASSERT_GE(keys.size(), 8u) << "a training MLP has forward, backward and update kernels";

  KernelProfileReport report;
  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(plan, Quick(), &report);
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_EQ(report.unmeasured, 0);
  EXPECT_EQ(report.known, 0);
  for (const std::string& note : report.notes) ADD_FAILURE() << "unexpected note: " << note;

  std::set<std::string> measured;
  std::set<std::string> op_types;
  for (const KernelCost& cost : *costs) {
    EXPECT_TRUE(measured.insert(cost.key()).second) << "measured twice: " << cost.key();
    EXPECT_GT(cost.us(), 0) << cost.key();
    EXPECT_EQ(cost.samples(), 3) << cost.key();
    EXPECT_EQ(cost.threads(), 1) << cost.key();
    EXPECT_EQ(cost.device_type(), DEVICE_CPU) << cost.key();
    EXPECT_GT(cost.elements(), 0) << cost.key();
    EXPECT_EQ(cost.key().rfind(cost.op_type() + " float32 cpu/t1 ", 0), 0u) << cost.key();
    op_types.insert(cost.op_type());
  }
  EXPECT_EQ(measured, keys);
  for (const char* op : {"random_batch", "matmul", "sgd_update"}) {
    EXPECT_EQ(op_types.count(op), 1u) << op << " not among the measured ops";
  }
}

// Kernels of 256 KiB of tensors or more get a time with their tensors
// evicted from the caches; smaller ones and a profile without `cold` none.
TEST(KernelProfilerTest, LargeKernelsGetAColdTime) {
  if (!CanEvictFromCaches()) GTEST_SKIP() << "no cache-flush instruction in this build";
  compiler::MlpSpec spec;
  spec.placement = "0:cpu:0";
  spec.batch = 64;
  spec.features = 512;
  spec.hidden = {512};
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(1, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();

  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(*plan, Quick());
  ASSERT_TRUE(costs.ok()) << costs.status();
  int cold = 0, warm_only = 0;
  for (const KernelCost& cost : *costs) {
    const bool large = cost.elements() * 4 >= (int64_t{256} << 10);
    if (large) {
      EXPECT_GT(cost.cold_us(), 0) << cost.key();
      ++cold;
    } else {
      EXPECT_EQ(cost.cold_us(), 0) << cost.key();
      ++warm_only;
    }
  }
  EXPECT_GT(cold, 0) << "the 512x512 weight's kernels are large";
  EXPECT_GT(warm_only, 0) << "the loss's kernels are small";

  KernelProfileOptions options = Quick();
  options.cold = false;
  costs = ProfilePlanKernels(*plan, options);
  ASSERT_TRUE(costs.ok()) << costs.status();
  for (const KernelCost& cost : *costs) EXPECT_EQ(cost.cold_us(), 0) << cost.key();
}

TEST(KernelProfilerTest, DataParallelDevicesShareTheirKeys) {
  // Two CPU devices run the same kernels on the same physical shapes: each
  // key is measured once, so there are fewer costs than kernels.
  const Plan plan = CompileMlp("0:cpu:0-1", 2);
  int kernels = 0;
  const std::set<std::string> keys = KeysOf(plan, 2, &kernels);
  ASSERT_LT(static_cast<int>(keys.size()), kernels);
  KernelProfileReport report;
  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(plan, Quick(2), &report);
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_EQ(report.unmeasured, 0);
  std::set<std::string> measured;
  for (const KernelCost& cost : *costs) {
    EXPECT_TRUE(measured.insert(cost.key()).second) << cost.key();
    EXPECT_EQ(cost.threads(), 2);
  }
  EXPECT_EQ(measured, keys);
}

TEST(KernelProfilerTest, KnownKeysAreSkipped) {
  const Plan plan = CompileMlp("0:cpu:0", 1);
  const std::set<std::string> keys = KeysOf(plan, 1);
  KernelProfileOptions options = Quick();
  // Half the keys known: only the other half is measured.
  std::set<std::string> unknown;
  int i = 0;
  for (const std::string& key : keys) {
    if (i++ % 2 == 0) {
      options.known_keys.insert(key);
    } else {
      unknown.insert(key);
    }
  }
  options.known_keys.insert("matmul float cpu/t1 in=1x1 out=1 {}");  // not in the plan
  KernelProfileReport report;
  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(plan, options, &report);
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_EQ(report.known, static_cast<int>(keys.size() - unknown.size()));
  std::set<std::string> measured;
  for (const KernelCost& cost : *costs) measured.insert(cost.key());
  EXPECT_EQ(measured, unknown);

  // All known: nothing measured.
  options.known_keys = keys;
  costs = ProfilePlanKernels(plan, options, &report);
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_TRUE(costs->empty());
}

TEST(KernelProfilerTest, ThreadsFollowTheMachineAndAreRestored) {
  Plan plan = CompileMlp("0:cpu:0", 1);
  plan.mutable_cluster()->mutable_machine(0)->set_cpu_threads(3);
  SetCpuComputeThreads(2);
  KernelProfileOptions options = Quick(0);  // as the runtime would: the machine's 3
  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(plan, options);
  ASSERT_TRUE(costs.ok()) << costs.status();
  ASSERT_FALSE(costs->empty());
  for (const KernelCost& cost : *costs) {
    EXPECT_EQ(cost.threads(), 3) << cost.key();
    EXPECT_NE(cost.key().find(" cpu/t3 "), std::string::npos) << cost.key();
  }
  EXPECT_EQ(CpuComputeThreadsSetting(), 2) << "the profile must put the setting back";
}

TEST(KernelProfilerTest, AKernelThatFailsBecomesANote) {
  Plan plan = CompileMlp("0:cpu:0", 1);
  // Three more kernels on the shapes of an existing matmul: one fails in
  // Init, one in Forward, one has no kernel registered at all.
  KernelConf* matmul = nullptr;
  TaskProto* task = nullptr;
  for (MachinePlan& machine : *plan.mutable_machine()) {
    for (TaskProto& t : *machine.mutable_task()) {
      for (KernelConf& conf : *t.mutable_kernel()) {
        if (matmul == nullptr && conf.op().op_type() == "matmul" && t.type() == TASK_COMPUTE) {
          matmul = &conf;
          task = &t;
        }
      }
    }
  }
  ASSERT_NE(matmul, nullptr);
  const KernelConf original = *matmul;
  for (const char* type :
       {"profile_test_failing_init", "profile_test_failing_forward", "profile_test_no_kernel"}) {
    KernelConf* added = task->add_kernel();
    *added = original;
    added->mutable_op()->set_op_type(type);
    added->mutable_op()->set_name(std::string("bad_") + type);
  }
  const std::set<std::string> keys = KeysOf(plan, 1);

  KernelProfileReport report;
  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(plan, Quick(), &report);
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_EQ(report.unmeasured, 3);
  ASSERT_EQ(report.notes.size(), 3u);
  std::map<std::string, std::string> note_of;
  for (const std::string& note : report.notes) {
    for (const char* type :
         {"profile_test_failing_init", "profile_test_failing_forward", "profile_test_no_kernel"}) {
      if (note.find(std::string("op 'bad_") + type + "' (" + type + ")") != std::string::npos) {
        note_of[type] = note;
      }
    }
  }
  EXPECT_NE(note_of["profile_test_failing_init"].find("/nowhere/data.npy"), std::string::npos)
      << note_of["profile_test_failing_init"];
  EXPECT_NE(note_of["profile_test_failing_forward"].find("the first timed call fails"), std::string::npos)
      << note_of["profile_test_failing_forward"];
  EXPECT_NE(note_of["profile_test_no_kernel"].find("NOT_FOUND"), std::string::npos)
      << note_of["profile_test_no_kernel"];
  // Every other key is still measured.
  EXPECT_EQ(costs->size() + 3, keys.size());
  for (const KernelCost& cost : *costs) {
    EXPECT_EQ(cost.op_type().rfind("profile_test_", 0), std::string::npos) << cost.key();
  }
}

// The default warm-up outlasts a kernel's choosing calls, so the samples
// time the kernel as a run's later iterations call it. With the warm-up of
// before (2 calls) the median sample was one of the slow calls.
TEST(KernelProfilerTest, SamplesComeAfterAKernelHasChosenHowToRun) {
  Plan plan = CompileMlp("0:cpu:0", 1);
  KernelConf* matmul = nullptr;
  for (MachinePlan& machine : *plan.mutable_machine()) {
    for (TaskProto& task : *machine.mutable_task()) {
      for (KernelConf& conf : *task.mutable_kernel()) {
        if (conf.op().op_type() == "matmul" && task.type() == TASK_COMPUTE) matmul = &conf;
      }
    }
  }
  ASSERT_NE(matmul, nullptr);
  matmul->mutable_op()->set_op_type("profile_test_settling");
  KernelProfileOptions options = Quick();
  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(plan, options);
  ASSERT_TRUE(costs.ok()) << costs.status();
  const KernelCost* settling = nullptr;
  for (const KernelCost& cost : *costs) {
    if (cost.op_type() == "profile_test_settling") settling = &cost;
  }
  ASSERT_NE(settling, nullptr);
  EXPECT_LT(settling->us(), SettlingKernel::kSlowUs / 2.0);
  EXPECT_GE(KernelProfileOptions().warmup + 1, math::GemmOrientation::kSettlingCalls);
}

TEST(KernelProfilerTest, BadOptionsAreRefused) {
  const Plan plan = CompileMlp("0:cpu:0", 1);
  KernelProfileOptions options = Quick();
  options.samples = 0;
  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(plan, options);
  ASSERT_FALSE(costs.ok());
  EXPECT_NE(costs.status().message().find("samples"), std::string::npos) << costs.status();
  options = Quick(-1);
  costs = ProfilePlanKernels(plan, options);
  ASSERT_FALSE(costs.ok());
  EXPECT_NE(costs.status().message().find("threads"), std::string::npos) << costs.status();
}

TEST(KernelProfilerTest, ABindingToNoRegisterIsAnErrorNamingTheOp) {
  Plan plan = CompileMlp("0:cpu:0", 1);
  KernelConf* conf = nullptr;
  for (TaskProto& t : *plan.mutable_machine(0)->mutable_task()) {
    if (t.type() == TASK_COMPUTE && t.kernel_size() > 0 && t.kernel(0).input_size() > 0) {
      conf = t.mutable_kernel(0);
      break;
    }
  }
  ASSERT_NE(conf, nullptr);
  conf->mutable_input(0)->set_regst_desc_id(987654321);
  StatusOr<std::vector<KernelCost>> costs = ProfilePlanKernels(plan, Quick());
  ASSERT_FALSE(costs.ok());
  EXPECT_NE(costs.status().message().find("'" + conf->op().name() + "'"), std::string::npos)
      << costs.status();
  EXPECT_NE(costs.status().message().find("987654321"), std::string::npos) << costs.status();
}

}  // namespace
}  // namespace profile
}  // namespace oflite
