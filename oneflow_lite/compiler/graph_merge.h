// GPU compute merge: for CUDA graph replay, the compute tasks of each GPU's
// compute stream become ONE task whose kernel list holds all their ops
// (docs/compiler.md, "GPU compute merge"; docs/gpu.md, "Graph replay").
//
// The runtime captures one act of that task as a device graph and replays
// it. The pass runs on the task graph between FuseAllReduceBuckets and
// PlanMemory, only for plans GraphCaptureBlocker() accepts. Per CUDA device
// d, the TASK_COMPUTE tasks of d on kComputeStream are grouped by level:
// how many times a path into the task left those tasks and came back (in
// data parallelism over GPUs the per-example losses are gathered through
// the host for their mean before the backward, and the gradients leave for
// the host all-reduce before the updates: forward level 0, backward 1,
// updates 2; one GPU: everything is level 0). Each level is convex (no
// path leaves it and returns), so merging it cannot make a cycle. Each
// level S, lowest first:
//   - |S| < 2, or S tasks of different parallel_id / parallel_num: left
//     alone (the note says why);
//   - otherwise one task "compute-graph@<device>" (then
//     "compute-graph-1@<device>", ...) replaces S: its kernels
//     in a topological order of S (producer before consumer; every reader
//     of a register before the S task updating it in place; ties by task
//     index), graph_replay set. It produces every register S produced
//     (consumers outside S kept; registers left without consumers get
//     regst_num 1) and consumes every register S consumed from outside,
//     once each, in the S tasks' place among consumers and mutators.
// Task indices are renumbered (the merged task takes the first S task's
// place); register ids are kept. Deterministic; single-threaded.
#ifndef ONEFLOW_LITE_COMPILER_GRAPH_MERGE_H_
#define ONEFLOW_LITE_COMPILER_GRAPH_MERGE_H_

#include <string>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/compiler/task_graph.h"
#include "proto/cluster.pb.h"

namespace oflite {
namespace compiler {

// Why one iteration per device cannot be captured once and replayed, or ""
// when it can (Plan.graph_capturable): the plan must run on one machine,
// have a CUDA task, every CUDA task a compute, variable or copy task, no
// dynamic register, and no op whose launch arguments the kernel computes
// from the iteration on the host. The one home of these conditions: the
// merge pass and the plan's flag both ask it.
std::string GraphCaptureBlocker(const TaskGraph& graph, const ClusterProto& cluster);

struct GraphMergeResult {
  // Per GPU with compute tasks, "; "-separated: "cuda:0: one captured task,
  // 12 ops", "cuda:0: 2 captured tasks, 10 + 4 ops" (with "(N more
  // stream-ordered)" when single tasks stay apart), or "cuda:1:
  // stream-ordered, <why>".
  std::string note;
};

// Rewrites `graph` in place as described above. Call only when
// GraphCaptureBlocker(*graph, cluster) is "". An InternalError (naming a
// task) if the ops of a device cannot be ordered (a cycle).
StatusOr<GraphMergeResult> MergeGpuComputeTasks(TaskGraph* graph);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_GRAPH_MERGE_H_
