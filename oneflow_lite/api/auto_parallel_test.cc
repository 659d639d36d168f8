// The layout search: coordinate descent finds the optimum of small cost
// tables; candidates of an MLP over 2 machines; the choice follows the
// link (a slow link moves it off data parallelism, a free one keeps the
// fastest at or below it), the memory limit, and is the same twice.
#include "oneflow_lite/api/auto_parallel.h"

#include <cmath>
#include <cstdlib>
#include <map>

#include "gtest/gtest.h"
#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/cost/kernel_key.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

TEST(CoordinateDescentTest, FindsTheOptimumOfASeparableTable) {
  // cost = sum_i table[i][x_i]; optimum (2, 0, 1) = 1 + 0 + 2.
  const std::vector<std::vector<double>> table = {{5, 4, 1}, {0, 3, 9}, {7, 2, 8}};
  auto cost = [&](const std::vector<int>& p) -> StatusOr<double> {
    double c = 0;
    for (size_t i = 0; i < p.size(); ++i) c += table[i][p[i]];
    return c;
  };
  DescentResult r = CoordinateDescent({0, 0, 0}, {3, 3, 3}, cost, 100);
  EXPECT_EQ(r.point, (std::vector<int>{2, 0, 1}));
  EXPECT_DOUBLE_EQ(r.cost, 3);
}

TEST(CoordinateDescentTest, FailedPointsCountAsInfiniteAndTheBudgetHolds) {
  // Pairs (a, b): only a == b compiles ("consistent layouts"); best (1, 1).
  auto cost = [](const std::vector<int>& p) -> StatusOr<double> {
    if (p[0] != p[1]) return InvalidArgumentError("inconsistent");
    return p[0] == 1 ? 1.0 : 10.0;
  };
  DescentResult r = CoordinateDescent({0, 0}, {2, 2}, cost, 50);
  // One coordinate at a time cannot leave (0, 0): every neighbour fails.
  EXPECT_EQ(r.point, (std::vector<int>{0, 0}));
  EXPECT_DOUBLE_EQ(r.cost, 10);
  DescentResult capped = CoordinateDescent({0, 0}, {2, 2}, cost, 2);
  EXPECT_LE(capped.evaluations, 2);
}

Job MlpJob() {
  Graph g("mlp", /*seed=*/1);
  g.SetPlacement(Placement::Parse("0-1:cpu:0"));
  Batch data = RandomBatch(&g, Shape{32, 64}, 10);
  Tensor h = g.Relu(Dense(&g, data.image, 256));
  h = g.Relu(Dense(&g, h, 256));
  Tensor logits = Dense(&g, h, 10);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{0.01, 0.0});
  g.SetIterations(10);
  StatusOr<Job> job = g.Build();
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

ClusterProto Machines(int count, double gbit) {
  ClusterProto cluster;
  for (int m = 0; m < count; ++m) {
    MachineProto* machine = cluster.add_machine();
    machine->set_id(m);
    machine->set_address("10.0.0." + std::to_string(m + 1));
    machine->set_cpu_devices(1);
    machine->set_cpu_threads(1);
    machine->mutable_nic()->set_gbit_per_s(gbit);
    machine->mutable_nic()->set_latency_us(20);
  }
  return cluster;
}

ClusterProto TwoMachines(double gbit) { return Machines(2, gbit); }

// A synthetic calibration: every kernel takes 1 ns per element it touches,
// filled in as the search meets new kernels.
Status Synthetic(const Plan& plan, Calibration* calibration) {
  cost::PlanIndex index(plan);
  std::set<std::string> known;
  for (const KernelCost& k : calibration->kernel()) known.insert(k.key());
  for (const TaskProto* task : index.tasks()) {
    for (const KernelConf& kernel : task->kernel()) {
      ASSIGN_OR_RETURN(std::string key, cost::KernelKey(kernel, DEVICE_CPU, 1, index));
      if (!known.insert(key).second) continue;
      ASSIGN_OR_RETURN(cost::KernelShapes shapes, cost::ShapesOfKernel(kernel, index));
      KernelCost* k = calibration->add_kernel();
      k->set_key(key);
      k->set_op_type(kernel.op().op_type());
      k->set_device_type(DEVICE_CPU);
      k->set_threads(1);
      k->set_elements(cost::KernelElements(shapes));
      k->set_us(1e-3 * static_cast<double>(k->elements()));
    }
  }
  return Status::OK();
}

AutoParallelOptions SyntheticOptions() {
  AutoParallelOptions options;
  options.measure_missing = Synthetic;
  options.min_split_elements = 1024;
  return options;
}

Calibration EmptyCalibration() {
  Calibration c;
  c.set_version(1);
  c.mutable_runtime()->set_act_us(2);
  c.mutable_runtime()->set_message_us(1);
  c.mutable_runtime()->set_copy_gbyte_per_s(5);
  return c;
}

double PredictedOf(const AutoParallelReport& report, const std::string& name) {
  for (const LayoutCandidate& c : report.candidate()) {
    if (c.name() == name) return c.predicted_step_us();
  }
  return -1;
}

TEST(AutoParallelTest, ForwardJobDropsBackwardAndOptimizerOps) {
  Job trained = MlpJob();
  StatusOr<Job> forward = ForwardJobOf(trained);
  ASSERT_TRUE(forward.ok()) << forward.status();
  EXPECT_LT(forward->op_size(), trained.op_size());
  for (const OpConf& op : forward->op()) EXPECT_FALSE(op.is_backward() || op.is_optimizer());
  Job inference = trained;
  inference.mutable_conf()->set_is_train(false);
  EXPECT_FALSE(ForwardJobOf(inference).ok());
}

TEST(AutoParallelTest, CandidatesOfAnMlpOverTwoMachines) {
  StatusOr<Job> forward = ForwardJobOf(MlpJob());
  ASSERT_TRUE(forward.ok());
  std::vector<LayoutSpec> layouts = CandidateLayouts(*forward, TwoMachines(1), SyntheticOptions());
  std::set<std::string> names;
  for (const LayoutSpec& l : layouts) names.insert(l.name);
  EXPECT_TRUE(names.count("dp"));
  EXPECT_TRUE(names.count("zero"));
  EXPECT_TRUE(names.count("tp"));
  int pipelines = 0;
  for (const LayoutSpec& l : layouts) pipelines += l.stages == 2;
  EXPECT_GT(pipelines, 0);
  // Every candidate compiles into a training job.
  for (const LayoutSpec& l : layouts) {
    StatusOr<Job> job = ApplyLayout(*forward, l, TwoMachines(1), /*ignore_hints=*/false);
    EXPECT_TRUE(job.ok()) << l.name << ": " << job.status();
  }
}

// The tiny GPT of testing/test_jobs.h; `tp` > 1: the hand-written Megatron
// layout.
Job GptJob(const std::string& placement, int64_t tp) {
  const char* dir = std::getenv("TEST_TMPDIR");
  StatusOr<Job> job = compiler::BuildTinyGptJob(
      std::string(dir != nullptr ? dir : "/tmp") + "/auto_gpt_tokens.npy", placement, tp);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : Job();
}

std::map<BoxingKind, int> BoxingKinds(const Plan& plan) {
  std::map<BoxingKind, int> kinds;
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.has_boxing() && t.machine_id() == 0) ++kinds[t.boxing().kind()];
    }
  }
  return kinds;
}

// The tensor-parallel candidate with its pairs' activations hinted lays a
// GPT out as the hand-written Megatron model does: all-reduces (and local
// B -> P of the row halves' biases), no reduce-scatter, all-gather or
// all-to-all around the attention heads; the same conversions on
// machine 0. On 4 machines the pipelines also come with tensor
// parallelism inside each stage.
TEST(AutoParallelTest, TensorParallelActivationsAreHintedLikeMegatron) {
  StatusOr<Job> forward = ForwardJobOf(GptJob("0-1:cpu:0", 1));
  ASSERT_TRUE(forward.ok()) << forward.status();
  const ClusterProto two = TwoMachines(1);
  const LayoutSpec* hinted = nullptr;
  std::vector<LayoutSpec> layouts = CandidateLayouts(*forward, two, SyntheticOptions());
  for (const LayoutSpec& l : layouts) {
    if (l.name == "tp-act") hinted = &l;
  }
  ASSERT_NE(hinted, nullptr);
  EXPECT_FALSE(hinted->op_hints.empty());
  StatusOr<Job> job = ApplyLayout(*forward, *hinted, two, /*ignore_hints=*/false);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> searched = compiler::Compile(*job, two);
  ASSERT_TRUE(searched.ok()) << searched.status();
  StatusOr<Plan> by_hand = compiler::Compile(GptJob("0-1:cpu:0", 2), two);
  ASSERT_TRUE(by_hand.ok()) << by_hand.status();
  const std::map<BoxingKind, int> kinds = BoxingKinds(*searched);
  std::string others;  // the conversions other than the pairs' (for the failure message)
  for (const MachinePlan& m : searched->machine()) {
    for (const TaskProto& t : m.task()) {
      if (!t.has_boxing() || t.machine_id() != 0 || t.boxing().kind() == BOXING_ALL_REDUCE ||
          t.boxing().kind() == BOXING_B_TO_P) {
        continue;
      }
      others += " " + t.boxing().lbn() + "(" + BoxingKind_Name(t.boxing().kind()) + ")";
    }
  }
  SCOPED_TRACE("other conversions:" + others);
  EXPECT_EQ(kinds.count(BOXING_REDUCE_SCATTER), 0u);
  EXPECT_EQ(kinds.count(BOXING_ALL_TO_ALL), 0u);
  EXPECT_GT(kinds.count(BOXING_ALL_REDUCE), 0u);
  EXPECT_EQ(kinds, BoxingKinds(*by_hand));

  std::vector<LayoutSpec> four = CandidateLayouts(*forward, Machines(4, 1), SyntheticOptions());
  int staged_tp = 0, at_norm = 0;
  for (const LayoutSpec& l : four) {
    if (l.stages != 2) continue;
    // The boundary before an attention's first matmul moves back over its
    // block's LayerNorm: only the residual stream crosses.
    ASSERT_EQ(l.cuts.size(), 1u);
    EXPECT_NE(forward->op(l.cuts[0] - 1).op_type(), "layer_norm") << l.name;
    at_norm += forward->op(l.cuts[0]).op_type() == "layer_norm";
    if (l.op_hints.empty()) continue;
    ++staged_tp;
    EXPECT_NE(l.name.find(" x tp2"), std::string::npos) << l.name;
    StatusOr<Job> staged = ApplyLayout(*forward, l, Machines(4, 1), /*ignore_hints=*/false);
    ASSERT_TRUE(staged.ok()) << l.name << ": " << staged.status();
    EXPECT_TRUE(compiler::Compile(*staged, Machines(4, 1)).ok()) << l.name;
  }
  EXPECT_GT(staged_tp, 0);
  EXPECT_GT(at_norm, 0);
}

TEST(AutoParallelTest, ASlowLinkMovesTheChoiceOffDataParallelism) {
  StatusOr<AutoParallelResult> slow =
      ChooseLayout(MlpJob(), TwoMachines(0.01), EmptyCalibration(), SyntheticOptions());
  ASSERT_TRUE(slow.ok()) << slow.status();
  const AutoParallelReport& report = slow->plan.auto_parallel();
  EXPECT_NE(report.chosen(), "dp");
  double dp = PredictedOf(report, "dp");
  double chosen = PredictedOf(report, report.chosen());
  ASSERT_GT(dp, 0);
  EXPECT_LT(chosen, dp / 2) << report.chosen();
  // The report is sorted, fastest first, and the chosen one is first
  // (unless a pipeline won by less than the margin: below).
  if (report.note().empty()) {
    EXPECT_EQ(report.candidate(0).name(), report.chosen());
  }
  // The plan is the chosen layout's, compiled for both machines.
  EXPECT_EQ(slow->plan.machine_size(), 2);

  StatusOr<AutoParallelResult> fast =
      ChooseLayout(MlpJob(), TwoMachines(0), EmptyCalibration(), SyntheticOptions());
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_LE(PredictedOf(fast->report, fast->report.chosen()), PredictedOf(fast->report, "dp"));
}

// The pipeline margin: with a margin of 0 the fastest prediction wins; with
// a margin larger than any gap, the best layout without stages is chosen
// instead of a pipeline, and the report's note says so.
TEST(AutoParallelTest, ANearTieGoesToTheLayoutWithoutStages) {
  AutoParallelOptions exact = SyntheticOptions();
  exact.pipeline_margin = 0;
  // No tensor-parallel candidates: on this link a Megatron pair with a
  // whole last layer beats every pipeline (the next test), and the margin
  // is about pipelines against data parallelism here.
  exact.min_split_elements = int64_t{1} << 40;
  StatusOr<AutoParallelResult> fastest =
      ChooseLayout(MlpJob(), TwoMachines(0.01), EmptyCalibration(), exact);
  ASSERT_TRUE(fastest.ok()) << fastest.status();
  const AutoParallelReport& first = fastest->plan.auto_parallel();
  EXPECT_EQ(first.candidate(0).name(), first.chosen());
  ASSERT_EQ(first.chosen().rfind("pp", 0), 0u)
      << "the slow link's fastest layout is a pipeline: " << first.chosen();

  AutoParallelOptions wide = SyntheticOptions();
  wide.pipeline_margin = 1000;
  wide.min_split_elements = exact.min_split_elements;
  StatusOr<AutoParallelResult> flat =
      ChooseLayout(MlpJob(), TwoMachines(0.01), EmptyCalibration(), wide);
  ASSERT_TRUE(flat.ok()) << flat.status();
  const AutoParallelReport& report = flat->plan.auto_parallel();
  EXPECT_NE(report.chosen().rfind("pp", 0), 0u) << report.chosen();
  double best_flat = 0;
  for (const LayoutCandidate& c : report.candidate()) {
    if (c.name().rfind("pp", 0) == 0 || !c.error().empty() || c.over_memory_limit()) continue;
    if (best_flat == 0 || c.predicted_step_us() < best_flat) best_flat = c.predicted_step_us();
  }
  EXPECT_DOUBLE_EQ(PredictedOf(report, report.chosen()), best_flat);
  EXPECT_NE(report.note().find(first.chosen()), std::string::npos) << report.note();
}

// The descent's refinements of an activation-hinted seed carry the hints of
// their own pairs: with the small last layer made whole, the row half's
// partial sums are reduced once for the replicated rest; with the seed's
// hints (its last layer split by columns, that layer's input replicated and
// output split) the refinement kept the seed's collectives and was no
// faster than the seed.
TEST(AutoParallelTest, ARefinementHintsTheActivationsOfItsOwnPairs) {
  StatusOr<AutoParallelResult> result =
      ChooseLayout(MlpJob(), TwoMachines(0.01), EmptyCalibration(), SyntheticOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  const AutoParallelReport& report = result->report;
  const double seed = PredictedOf(report, "tp-act");
  ASSERT_GT(seed, 0);
  double whole_last = 0;
  std::string name;
  for (const LayoutCandidate& c : report.candidate()) {
    const std::string& n = c.name();
    if (n.rfind("tp-act+", 0) != 0 || n.size() < 2 || n.substr(n.size() - 2) != ",B") continue;
    if (!c.error().empty()) continue;
    if (whole_last == 0 || c.predicted_step_us() < whole_last) {
      whole_last = c.predicted_step_us();
      name = n;
    }
  }
  ASSERT_GT(whole_last, 0) << "no refinement with a whole last layer was tried";
  EXPECT_LT(whole_last, 0.95 * seed) << name << " against tp-act";
}

// On 4 machines the 2-D layout (data parallel 2 x tensor parallel 2) is a
// seed of its own descent over the variables' SBP on the tensor-parallel
// axis: its refinements are compiled, simulated and listed, and the best
// of them is no slower than the seed.
TEST(AutoParallelTest, TheTwoDimensionalLayoutIsRefinedByItsOwnDescent) {
  StatusOr<AutoParallelResult> result =
      ChooseLayout(MlpJob(), Machines(4, 0.1), EmptyCalibration(), SyntheticOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  const AutoParallelReport& report = result->report;
  // Seeds: the pairs alone and with their activations hinted.
  double seed = PredictedOf(report, "dp2xtp2");
  ASSERT_GT(seed, 0);
  const double with_activations = PredictedOf(report, "dp2xtp2-act");
  if (with_activations > 0) seed = std::min(seed, with_activations);
  int refined = 0;
  double best = seed;
  for (const LayoutCandidate& c : report.candidate()) {
    if (c.name().rfind("dp2xtp2", 0) != 0 || c.name().find('+') == std::string::npos) continue;
    ++refined;
    EXPECT_NE(c.description().find("on the tensor-parallel axis"), std::string::npos)
        << c.description();
    if (c.error().empty() && c.predicted_step_us() > 0) best = std::min(best, c.predicted_step_us());
  }
  EXPECT_GT(refined, 0);
  EXPECT_LE(best, seed);
  EXPECT_LE(PredictedOf(report, report.chosen()), best);
}

TEST(AutoParallelTest, TheMemoryLimitBindsAndTooSmallALimitIsAnError) {
  StatusOr<AutoParallelResult> free_choice =
      ChooseLayout(MlpJob(), TwoMachines(100), EmptyCalibration(), SyntheticOptions());
  ASSERT_TRUE(free_choice.ok());
  int64_t chosen_bytes = 0;  // the chosen one's (not always the first: the pipeline margin)
  for (const LayoutCandidate& c : free_choice->report.candidate()) {
    if (c.name() == free_choice->report.chosen()) chosen_bytes = c.peak_machine_bytes();
  }
  ASSERT_GT(chosen_bytes, 0);
  // A limit that the chosen layout exceeds and another one meets.
  int64_t below = 0;
  for (const LayoutCandidate& c : free_choice->report.candidate()) {
    if (c.error().empty() && c.peak_machine_bytes() < chosen_bytes) {
      below = std::max(below, c.peak_machine_bytes());
    }
  }
  ASSERT_GT(below, 0) << "no candidate needs less memory than " << free_choice->report.chosen();
  AutoParallelOptions limited = SyntheticOptions();
  limited.memory_limit_bytes = below;
  StatusOr<AutoParallelResult> bound =
      ChooseLayout(MlpJob(), TwoMachines(100), EmptyCalibration(), limited);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_NE(bound->report.chosen(), free_choice->report.chosen());
  for (const LayoutCandidate& c : bound->report.candidate()) {
    if (c.name() == bound->report.chosen()) {
      EXPECT_LT(c.peak_machine_bytes(), chosen_bytes);
    }
  }
  limited.memory_limit_bytes = 1;
  StatusOr<AutoParallelResult> none =
      ChooseLayout(MlpJob(), TwoMachines(100), EmptyCalibration(), limited);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no layout fits"), std::string::npos) << none.status();
}

TEST(AutoParallelTest, SameInputsSameChoice) {
  StatusOr<AutoParallelResult> a =
      ChooseLayout(MlpJob(), TwoMachines(1), EmptyCalibration(), SyntheticOptions());
  StatusOr<AutoParallelResult> b =
      ChooseLayout(MlpJob(), TwoMachines(1), EmptyCalibration(), SyntheticOptions());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->report.SerializeAsString(), b->report.SerializeAsString());
  EXPECT_EQ(a->plan.SerializeAsString(), b->plan.SerializeAsString());
}

}  // namespace
}  // namespace oflite
