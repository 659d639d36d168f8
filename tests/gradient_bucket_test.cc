// Gradient buckets end to end (compiler/gradient_buckets.h): data-parallel
// MLP and LeNet-5 plans compiled with fusion (the default
// CompileOptions.fuse_max_bytes) and without it (0), each run by 2, 3 and 4
// ranks in one process (and on 4 ranks, rings over groups of them: a 2-D
// placement's axis, a pipeline stage's data-parallel pair; and ZeRO's
// reduce-scatters and all-gathers), every rank with its own
// MultiMachineSession over TCP on loopback. The fused plan has buckets and fewer collective tasks;
// its losses are bitwise equal to the unfused plan's (both add each
// gradient's parts in rank order: the exchange all-reduce).
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/shard_optimizer.h"
#include "oneflow_lite/comm/builtin_providers.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/common/ring_segments.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kIterations = 4;

std::string PlacementText(int ranks) { return "0-" + std::to_string(ranks - 1) + ":cpu:0"; }

// The MLP of every case: 20-16-8-4, batch 12 (divisible by 2, 3 and 4).
compiler::MlpSpec MlpOn(const std::string& placement) {
  compiler::MlpSpec spec;
  spec.batch = 12;
  spec.features = 20;
  spec.hidden = {16, 8};
  spec.classes = 4;
  spec.placement = placement;
  spec.iterations = kIterations;
  return spec;
}

StatusOr<Job> MlpJob(int ranks) { return compiler::BuildMlpJob(MlpOn(PlacementText(ranks))); }

Tensor ConvReluPool(Graph* g, const Tensor& x, int64_t filters, int64_t pad) {
  Conv2dOptions options;
  options.padding = {pad, pad};
  return MaxPool2d(g, g->Relu(Conv2d(g, x, filters, 5, options)), 2);
}

// LeNet-5 (6/16 5x5 convs, 120-84-10), momentum SGD, synthetic data.
StatusOr<Job> LenetJob(int ranks) {
  Graph g("lenet5_buckets", /*seed=*/3);
  g.SetPlacement(Placement::Parse(PlacementText(ranks)));
  Batch data = RandomBatch(&g, Shape{12, 1, 28, 28}, 10);  // divisible by 2, 3 and 4
  Tensor x = ConvReluPool(&g, data.image, 6, 2);  // [B, 6, 14, 14]
  x = ConvReluPool(&g, x, 16, 0);                  // [B, 16, 5, 5]
  x = g.Relu(Dense(&g, x, 120));
  x = g.Relu(Dense(&g, x, 84));
  Tensor logits = Dense(&g, x, 10);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label),
             Momentum{.learning_rate = 0.05, .momentum = 0.9});
  g.SetIterations(kIterations);
  return g.Build();
}

struct PlanShape {
  int collectives = 0;  // collective tasks on machine 0
  int buckets = 0;      // of them, fused buckets
  int members = 0;      // conversions inside the buckets
  int gathers = 0;      // of them, S -> B all-gathers
  int scatters = 0;     // of them, P -> S reduce-scatters
};

PlanShape ShapeOf(const Plan& plan) {
  PlanShape shape;
  for (const TaskProto& task : plan.machine(0).task()) {
    if (task.type() != TASK_COLLECTIVE) continue;
    ++shape.collectives;
    if (task.collective().member_size() == 0) continue;
    ++shape.buckets;
    shape.members += task.collective().member_size();
    for (const CollectiveMember& member : task.collective().member()) {
      shape.gathers += member.in_sbp().has_split_axis() ? 1 : 0;
      shape.scatters += member.out_sbp().has_split_axis() ? 1 : 0;
    }
  }
  return shape;
}

std::string FreeMaster() {
  int port = 0;
  auto fd = comm::ListenTcp("127.0.0.1", &port);
  if (!fd.ok()) return "";
  ::close(*fd);
  return "127.0.0.1:" + std::to_string(port);
}

// One rank of `plan` over TCP, as `oflite run` wires it.
Status RunRank(const Plan& plan, int rank, const std::string& master,
               testing::MetricsRecorder* recorder) {
  comm::BuiltinProviderOptions providers;
  providers.job_token = "gradient-bucket-test";
  ASSIGN_OR_RETURN(comm::ProviderFactory tcp, comm::BuiltinProviders(providers).Find("tcp"));
  MultiMachineOptions multi;
  multi.rank = rank;
  multi.master = master;
  multi.provider = tcp;
  multi.provider_name = "tcp";
  multi.job_token = providers.job_token;
  multi.connect_timeout = milliseconds(30000);
  multi.ring_timeout = milliseconds(60000);
  multi.on_fatal = [](const JobFailure&) {};  // the Status below says it
  ASSIGN_OR_RETURN(std::unique_ptr<MultiMachineSession> session,
                   MultiMachineSession::Start(plan, multi));
  RuntimeOptions options;
  options.machine_id = rank;
  options.metrics = recorder;
  options.watchdog_timeout = milliseconds(60000);
  session->Configure(&options);
  // One rank at a time builds its kernels: in production each rank is a
  // process of its own, and oneDNN's primitive cache (an uninstrumented
  // library) trips tsan when two runtimes create convolutions at once.
  static std::mutex create_mutex;
  std::unique_lock<std::mutex> creating(create_mutex);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  creating.unlock();
  RETURN_IF_ERROR(session->AfterCreate(runtime.get()));
  Status run = runtime->Run();
  if (run.ok()) run = session->Finish();
  session->Detach();
  return run;
}

// The losses of `plan` run by its machines (the sink is on machine 0).
std::map<int64_t, double> Losses(const Plan& plan) {
  const int ranks = plan.machine_size();
  const std::string master = FreeMaster();
  EXPECT_FALSE(master.empty());
  std::vector<testing::MetricsRecorder> recorders(ranks);
  std::vector<Status> results(ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back(
        [&, rank] { results[rank] = RunRank(plan, rank, master, &recorders[rank]); });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < ranks; ++rank) {
    EXPECT_TRUE(results[rank].ok()) << "rank " << rank << ": " << results[rank];
  }
  return recorders[0].Values("loss");
}

// `exchange_max_bytes` 0: every all-reduce, the buckets' too, is a ring;
// `fuse_max_bytes` -1: the compiler's default.
PlanShape ExpectFusedEqualsUnfused(const Job& job, int ranks, int64_t exchange_max_bytes = -1,
                                   int64_t fuse_max_bytes = -1) {
  const ClusterProto cluster = compiler::MakeCluster(ranks, 1);
  compiler::CompileOptions fused_options;
  if (exchange_max_bytes >= 0) fused_options.exchange_max_bytes = exchange_max_bytes;
  if (fuse_max_bytes >= 0) fused_options.fuse_max_bytes = fuse_max_bytes;
  compiler::CompileOptions unfused_options = fused_options;
  unfused_options.fuse_max_bytes = 0;
  StatusOr<Plan> fused = compiler::Compile(job, cluster, fused_options);
  StatusOr<Plan> unfused = compiler::Compile(job, cluster, unfused_options);
  EXPECT_TRUE(fused.ok()) << fused.status();
  EXPECT_TRUE(unfused.ok()) << unfused.status();
  if (!fused.ok() || !unfused.ok()) return {};
  const PlanShape with = ShapeOf(*fused);
  const PlanShape without = ShapeOf(*unfused);
  EXPECT_GE(with.buckets, 1);
  EXPECT_EQ(without.buckets, 0);
  EXPECT_EQ(with.collectives, without.collectives - with.members + with.buckets);
  const size_t bound = static_cast<size_t>(fused_options.exchange_max_bytes);
  for (const TaskProto& task : fused->machine(0).task()) {
    if (task.collective().member_size() == 0) continue;
    // The size rule of common/ring_segments.h for the bucket's bytes.
    // A ring over a group of the machines has fewer ranks than the job.
    const size_t bytes = static_cast<size_t>(task.collective().buffer_bytes());
    const int n = task.boxing().ring_task_id_size();
    const CollectiveAlgorithm want =
        UseDoublingAllReduce(bytes, n, bound)        ? COLLECTIVE_DOUBLING_ALL_REDUCE
        : UseExchangeAllReduce(bytes, n, bound)      ? COLLECTIVE_EXCHANGE_ALL_REDUCE
        : UseScatterGatherAllReduce(bytes, n, bound) ? COLLECTIVE_SCATTER_GATHER_ALL_REDUCE
                                                     : COLLECTIVE_RING_ALL_REDUCE;
    EXPECT_EQ(task.collective().algorithm(), want) << task.name() << " of " << bytes << " bytes";
  }

  const std::map<int64_t, double> want = Losses(*unfused);
  const std::map<int64_t, double> got = Losses(*fused);
  EXPECT_EQ(want.size(), static_cast<size_t>(kIterations));
  EXPECT_EQ(got.size(), want.size());
  if (want.size() != static_cast<size_t>(kIterations) || got.size() != want.size()) return with;
  for (const auto& [iteration, loss] : want) {
    EXPECT_TRUE(std::isfinite(loss)) << "iteration " << iteration;
    EXPECT_EQ(got.at(iteration), loss) << "iteration " << iteration;  // bitwise
  }
  // Training moved: equal curves are not equal constants.
  EXPECT_NE(want.begin()->second, want.rbegin()->second);
  return with;
}

class GradientBucketTest : public ::testing::TestWithParam<int> {};

TEST_P(GradientBucketTest, MlpFusedEqualsUnfused) {
  StatusOr<Job> job = MlpJob(GetParam());
  ASSERT_TRUE(job.ok()) << job.status();
  ExpectFusedEqualsUnfused(*job, GetParam());
}

// At 3 ranks LeNet's bucket outgrows the exchange (half the bound from 3
// ranks) and runs scatter-gather, which sums each element in rank order as
// the exchange does its members: bitwise equal. At 4 ranks bucket and
// members run recursive doubling, (b0 + b1) + (b2 + b3).
TEST_P(GradientBucketTest, Lenet5FusedEqualsUnfused) {
  StatusOr<Job> job = LenetJob(GetParam());
  ASSERT_TRUE(job.ok()) << job.status();
  ExpectFusedEqualsUnfused(*job, GetParam());
}

// A bucket run by the ring all-reduce: with 2 ranks every element is one
// addition of the two parts, in whichever order, so bitwise equal too.
TEST(GradientBucketRingTest, MlpRingBucketEqualsUnfusedRings) {
  StatusOr<Job> job = MlpJob(2);
  ASSERT_TRUE(job.ok()) << job.status();
  ExpectFusedEqualsUnfused(*job, 2, /*exchange_max_bytes=*/0);
}

// Rings over groups of the machines fuse too: data x tensor parallel on 4
// machines (the axis-0 all-reduces run over {0, 2} and {1, 3}), and a
// 2-stage pipeline whose stages are data-parallel pairs ({0, 1} and {2, 3}).
// Every bucket spans 2 of the 4 ranks; 2 parts sum alike in any order.
TEST(GradientBucketGroupTest, DataTensor2dOnFourMachinesFusesPerGroup) {
  compiler::MlpSpec spec = MlpOn("0-3:cpu:0@2x2");
  spec.model_parallel = compiler::ModelParallel::kDataTensor2d;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ExpectFusedEqualsUnfused(*job, 4);
}

TEST(GradientBucketGroupTest, DataParallelStagesFusePerStage) {
  compiler::MlpSpec spec = MlpOn("0:cpu:0");  // the spec's default placement
  spec.stages = {"0-1:cpu:0", "0-1:cpu:0", "2-3:cpu:0"};
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ExpectFusedEqualsUnfused(*job, 4);
}

// Sharded optimizer states (ZeRO): the gradients' P -> S reduce-scatters
// and the parameters' S -> B all-gathers join buckets, run as the bucket's
// all-reduce (each gradient cut to this rank's rows, each parameter's rows
// placed among -0.0 elements). Uneven rows at 3 ranks (16 = 6 + 5 + 5). The
// unfused small reduce-scatters are the same all-reduce and cut, summing
// in the same order, and x + -0.0 is x: bitwise equal.
TEST_P(GradientBucketTest, ShardedOptimizerFusesScattersAndGathers) {
  compiler::MlpSpec spec = MlpOn(PlacementText(GetParam()));
  spec.optimizer = compiler::MlpOptimizer::kAdam;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Job> sharded = ShardOptimizerStates(*job);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  const PlanShape with = ExpectFusedEqualsUnfused(*sharded, GetParam());
  EXPECT_GE(with.gathers, 2);
  EXPECT_GE(with.scatters, 2);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GradientBucketTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

}  // namespace
}  // namespace oflite
