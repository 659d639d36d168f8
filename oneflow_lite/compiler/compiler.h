// The compiler: Job + cluster -> Plan.
//
// Passes, in order (docs/compiler.md):
//   1. LogicalGraph::Build: placements, registry lookup, edges, topological
//      order, shape inference;
//   2. DeduceSbp: SBP signatures by the byte cost model, user hints first;
//   3. BuildTaskGraph: compute/source/variable tasks, boxing and collectives,
//      copies, CommNet tasks, control registers, the metrics sink; then
//      FuseAllReduceBuckets (gradient_buckets.h) groups small all-reduces;
//      then, for graph-capturable plans, MergeGpuComputeTasks
//      (graph_merge.h) makes each GPU's compute stream one replayed task;
//   4. PlanMemory: topological order per machine, lifetimes, offsets with
//      reuse (plus the control registers that make reuse safe);
//   5. emission: bit-packed task ids, one MachinePlan per machine.
// Every input error is a Status naming the op, blob, field or file at fault.
// Compile is deterministic: equal inputs give equal plans (and, through
// SavePlan, byte-identical files). Thread-safe (no shared state beyond the
// read-only op registry).
#ifndef ONEFLOW_LITE_COMPILER_COMPILER_H_
#define ONEFLOW_LITE_COMPILER_COMPILER_H_

#include <string>

#include "oneflow_lite/common/ring_segments.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/compiler/collective_choice.h"
#include "oneflow_lite/compiler/memory_planner.h"
#include "oneflow_lite/compiler/sbp_deduction.h"
#include "oneflow_lite/compiler/task_graph.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace compiler {

struct CompileOptions {
  // Replace op chains by fused ops first (fusion.h); `oflite compile --fuse`.
  // Off by default: a fused plan has fewer actors than ops.
  bool fuse = false;
  // Also replace matmul -> bias_add pairs by matmul_bias (fusion.h), whose
  // CPU kernel adds the bias in the GEMM's epilogue; not bit-identical to
  // the pair. `oflite compile --fuse_matmul_bias`; the trainer's --fuse
  // turns both on.
  bool fuse_matmul_bias = false;
  // Partial-sum collectives of tensors of at most this many bytes (and a
  // fan-out bound, collective_choice.h) use the exchange all-reduce instead
  // of the ring; 0: always the ring. `oflite compile --exchange_max_bytes`.
  int64_t exchange_max_bytes = static_cast<int64_t>(kExchangeAllReduceMaxBytes);
  // Gradient buckets (gradient_buckets.h): small P -> B all-reduces across
  // machines are fused into buckets of at most this many bytes, each one
  // collective; 0: every all-reduce is its own collective (the plans of
  // before the option). `oflite compile --fuse_max_bytes`. Default: the
  // exchange bound, so that a whole bucket still goes in one message latency
  // (the exchange) instead of one latency per tensor; past it the ring's
  // bandwidth term dominates and a bigger bucket would only delay its first
  // members (less overlap with the rest of backward).
  int64_t fuse_max_bytes = static_cast<int64_t>(kExchangeAllReduceMaxBytes);
  // Split clip norms (clip_norm.h): a global-norm clip over gradients of
  // split parameters sums their squares where they lie and reduces one
  // scalar per group, instead of gathering every gradient whole; false: the
  // clip reads its gradients whole (the plans of before the pass). `oflite
  // compile --split_clip_norm`.
  bool split_clip_norms = true;
  // Graph replay (graph_merge.h): in a graph-capturable plan, the compute
  // tasks of each GPU's compute stream become one task (TaskProto
  // graph_replay) the runtime may capture and replay; false: one task per
  // op, as before the pass. `oflite compile --graph-replay`.
  bool merge_gpu_compute = true;
  // When set, each partial-sum collective takes the algorithm this model
  // predicts fastest (a calibration's curves of the transport that will
  // carry it: `oflite compile --calibration`); unset: the size rule, its
  // algorithms ranked by the cluster's slowest link where the cluster
  // states link rates (cost::StatedLinkCollectiveUs).
  CollectiveTimeFn collective_time;
  // What collective_time is, for Plan.collective_note (e.g. "calibration
  // 'C' over tcp").
  std::string collective_source;
  CostWeights weights;
  TaskGraphOptions tasks;
  MemoryPlanOptions memory;
};

StatusOr<Plan> Compile(const Job& job, const ClusterProto& cluster,
                       const CompileOptions& options = {});

// Reads a text ClusterProto and validates it; errors name the file and the
// field.
StatusOr<ClusterProto> LoadCluster(const std::string& path);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_COMPILER_H_
