// Automatic parallel layouts: `oflite compile --auto-parallel`
// (docs/simulate.md, "Choosing a layout").
//
// From a trained Job, the search takes its forward graph (the ops that are
// neither backward nor optimizer ops) and lays it out over the cluster in
// several ways, each then differentiated, given its optimizer and compiled
// like any job:
//   dp          every op over every device, the batch split S(0);
//   zero        dp with the optimizer states and parameters sharded;
//   tp          Megatron pairs: a matmul whose input is whole gets its
//               weight column-split S(1) (its output split by columns, its
//               bias S(0)), the next one row-split S(0) (its output a
//               partial sum); small variables stay whole;
//   dpAxtpB     both on a 2-D hierarchy of the devices (A x B = devices):
//               (S(0), B) batch, (B, S(k)) weights;
//   ppK mM      K pipeline stages over equal machine ranges, cut between
//               matmuls (every cut for K = 2, the balanced one beyond),
//               data parallel inside a stage, 1F1B over M micro-batches.
// Then a coordinate descent from the fastest flat one-stage layout changes
// one large variable's SBP at a time (B, S(0), S(1)) while that lowers the
// predicted time, and another from the fastest 2-D one does the same on
// its tensor-parallel axis. Every candidate is compiled (compiler::Compile) and
// simulated (cost::SimulatePlan); the fastest whose largest machine's memory
// blocks fit the limit wins, and its job is compiled as a node plan
// (CompileNodePlan) with the report in Plan.auto_parallel.
// The compiler's own deduction places everything the layout does not hint,
// so a layout is a set of hints and placements, not a plan by hand.
// User hints and placements stay binding unless ignore_hints (a 1-D hint
// on a data source becomes (hint, B) on a 2-D placement).
#ifndef ONEFLOW_LITE_API_AUTO_PARALLEL_H_
#define ONEFLOW_LITE_API_AUTO_PARALLEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/cost/simulator.h"
#include "proto/calibration.pb.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"
#include "proto/plan.pb.h"

namespace oflite {

struct AutoParallelOptions {
  int64_t memory_limit_bytes = 0;  // per machine (its memory blocks); 0: none
  bool ignore_hints = false;
  std::vector<int64_t> micro_batches = {2, 4, 8};  // pipelined candidates
  int max_evaluations = 64;        // plans compiled and simulated, at most
  // Wall-clock budget of the search: once spent, no further candidate is
  // compiled (the report says how many were); 0: none.
  double time_budget_seconds = 300;
  int64_t min_split_elements = 16384;  // smaller variables stay whole
  // A pipelined layout is chosen over the best one without stages only
  // when predicted faster by more than this fraction of its step: the
  // model's validation predicts pipelines fast more often than the rest
  // (docs/simulate.md), so a near tie goes to the layout it predicts
  // better. 0: the fastest prediction wins.
  double pipeline_margin = 0.03;
  compiler::CompileOptions compile;
  // sim.iterations 0: 12 for the search (a steady state is reached well
  // before; the chosen plan's own simulation is the user's to run).
  cost::SimOptions sim;
  // Called with each candidate's plan before it is simulated: adds to the
  // calibration what it lacks (the CLI measures the plan's new kernels).
  // May be empty.
  std::function<Status(const Plan&, Calibration*)> measure_missing;
  // Called with each candidate's plan first: a plan it refuses (the CLI
  // passes the plan verifier every loader runs) is not a candidate, with
  // the error in its report entry. May be empty.
  std::function<Status(const Plan&)> verify;
  // Progress lines for people; may be empty.
  std::function<void(const std::string&)> log;
};

// One layout as hints and placements on the forward job.
struct LayoutSpec {
  std::string name;
  std::string description;
  int stages = 1;
  // Stage s >= 1 begins at the forward op index cut[s - 1].
  std::vector<int> cuts;
  int64_t micro_batches = 1;
  // 2-D hierarchy of every stage's devices (empty: flat).
  std::vector<int64_t> hierarchy;
  std::map<std::string, NdSbp> variable_sbp;  // variable op -> its output's hint
  // Other ops' hints, one per output, and their gradients' (empty: none):
  // the activations of Megatron pairs (the column half's output split,
  // the row half's partial, the pair's input replicated).
  struct OpHints {
    std::vector<NdSbp> output;
    std::vector<NdSbp> output_grad;
  };
  std::map<std::string, OpHints> op_hints;
  bool has_source_sbp = false;
  NdSbp source_sbp;
  bool zero = false;
};

struct AutoParallelResult {
  Job job;     // the chosen layout's training job
  Plan plan;   // its node plan, with Plan.auto_parallel
  AutoParallelReport report;
  Calibration calibration;  // the input's plus what measure_missing added
};

StatusOr<AutoParallelResult> ChooseLayout(const Job& trained, const ClusterProto& cluster,
                                          const Calibration& calibration,
                                          const AutoParallelOptions& options);

// The pieces, for tests and tools.
// The forward job of a trained one: its backward and optimizer ops and
// their blobs dropped, control inputs to them cleared. FailedPrecondition
// for a job already micro-batched or not a training job.
StatusOr<Job> ForwardJobOf(const Job& trained);
// The layouts ChooseLayout starts from.
std::vector<LayoutSpec> CandidateLayouts(const Job& forward, const ClusterProto& cluster,
                                         const AutoParallelOptions& options);
// The training job of `forward` laid out as `layout`.
StatusOr<Job> ApplyLayout(const Job& forward, const LayoutSpec& layout,
                          const ClusterProto& cluster, bool ignore_hints);

// Coordinate descent over discrete choices: starting from `start`, tries
// every other value of one coordinate at a time, keeps a change that lowers
// `cost`, and repeats until a pass changes nothing or `max_evaluations`
// costs were asked (a failed cost counts as +inf). Returns the best point
// and its cost. Deterministic.
struct DescentResult {
  std::vector<int> point;
  double cost = 0;
  int evaluations = 0;
};
DescentResult CoordinateDescent(const std::vector<int>& start, const std::vector<int>& choices,
                                const std::function<StatusOr<double>(const std::vector<int>&)>& cost,
                                int max_evaluations);

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_AUTO_PARALLEL_H_
