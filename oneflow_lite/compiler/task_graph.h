// The physical task graph: tasks (one actor each) and the registers they
// produce and consume, before memory planning and id assignment.
//
// BuildTaskGraph lowers the logical graph with its chosen SBP signatures:
//   - one compute/source/variable task per (op, parallel id);
//   - boxing where a consumer needs another layout than its producer made:
//     TASK_BOXING tasks when the placement is on one machine (or the step
//     needs no communication), TASK_COLLECTIVE ring ranks when it spans
//     machines; on a hierarchical placement, one 1-D step per hierarchy
//     axis (NdBoxingPath, nd_sbp.h), lowered the same way on each
//     sub-group of that axis over the tensor as split by the other axes
//     (BoxingConf.group_parallel_id and friends); between different
//     placements where either is hierarchical: all-B on the producer, a
//     whole replica copied to each consumer device, local cuts there;
//   - TASK_COPY_D2H / TASK_COPY_H2D around CUDA devices (host-side registers
//     in pinned memory), TASK_COMMNET on the consumer's machine for every
//     register read by another machine (one per register and machine);
//   - control registers for OpConf.control_input;
//   - one TASK_SINK on machine 0 for the loss and metrics of the train conf.
// Task and register indices are creation order, which is deterministic.
// Single-threaded; the graph is a plain value.
#ifndef ONEFLOW_LITE_COMPILER_TASK_GRAPH_H_
#define ONEFLOW_LITE_COMPILER_TASK_GRAPH_H_

#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/compiler/logical_graph.h"
#include "oneflow_lite/compiler/placement.h"
#include "oneflow_lite/compiler/sbp_deduction.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace compiler {

// Streams of a device (docs/plan_format.md).
inline constexpr int kComputeStream = 0;
inline constexpr int kH2DStream = 1;
inline constexpr int kD2HStream = 2;
inline constexpr int kCommNetStream = 3;
inline constexpr int kBoxingStream = 4;
inline constexpr int kCollectiveStream = 5;
inline constexpr int kSourceStream = 6;
inline constexpr int kSinkStream = 7;

inline constexpr int64_t kBlobAlignment = 256;

struct RegstNode {
  int id = 0;  // the plan's regst_desc_id
  std::string name;
  int producer = -1;            // task index
  std::vector<int> consumers;   // task indices, insertion order
  std::vector<int> mutators;    // subset of consumers writing in place
  int regst_num = 1;
  MemZoneId zone;
  std::vector<BlobInRegst> blobs;
  int64_t bytes_per_regst = 0;
  bool is_persistent = false;
  bool is_ctrl = false;
  bool is_dynamic = false;
  CrossMachineStrategy cross_machine_strategy = CM_NONE;
  // Filled by the memory planner.
  std::vector<int64_t> mem_offset;
  int64_t lifetime_begin = 0;
  int64_t lifetime_end = 0;
  bool memory_reused = false;
};

struct TaskNode {
  int index = 0;
  TaskType type = TASK_INVALID;
  std::string name;
  std::string op_name;
  DeviceRef device;
  int stream = 0;
  int64_t parallel_id = 0;
  int64_t parallel_num = 1;
  // An op task on a hierarchical placement: its hierarchy
  // (ParallelContext.hierarchy); empty otherwise.
  std::vector<int64_t> hierarchy;
  std::vector<KernelConf> kernels;  // bindings hold regst ids
  std::vector<int> produced;        // regst ids
  std::vector<std::pair<std::string, std::vector<int>>> consumed;
  BoxingConf boxing;                // regst ids; ring tasks below
  std::vector<int> ring_tasks;      // task indices of a collective's ring
  // A fused all-reduce bucket (gradient_buckets.h): its members, with regst
  // ids; empty for every other task.
  std::vector<CollectiveMember> bucket;
  int commnet_src_regst = -1;
  SinkConf sink;
  int64_t topo_order = 0;           // filled by the memory planner
  // The merged compute task of a GPU (graph_merge.h): TaskProto.graph_replay.
  bool graph_replay = false;
};

struct TaskGraph {
  std::vector<TaskNode> tasks;
  std::vector<RegstNode> regsts;

  bool IsDeviceTask(int task) const { return tasks[task].device.type == DEVICE_CUDA; }
};

struct TaskGraphOptions {
  int pipeline_depth = 2;  // regst_num on stage boundaries, sources, cross-machine
};

// Drops the tasks with removed[index] set and renumbers the rest (creation
// order kept): TaskNode.index, ring_tasks and every register's producer,
// consumers and mutators. The caller has already moved every reference away
// from the removed tasks (none of them may still produce a register).
// Register ids are kept.
void RemoveTasks(TaskGraph* graph, const std::vector<bool>& removed);

StatusOr<TaskGraph> BuildTaskGraph(const LogicalGraph& graph, const std::vector<OpSbp>& sbp,
                                   const Job& job, const ClusterProto& cluster,
                                   const TaskGraphOptions& options);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_TASK_GRAPH_H_
