// Summaries of a Plan for people and tests: actors by kind, boxing
// conversions, cross-machine edges and their memory strategy, memory per
// zone. Used by `oflite inspect` and by the compiler's tests. Reads only the
// Plan proto (no compiler state); pure functions, thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_PLAN_SUMMARY_H_
#define ONEFLOW_LITE_COMPILER_PLAN_SUMMARY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "proto/plan.pb.h"

namespace oflite {
namespace compiler {

// A register pulled by a TASK_COMMNET task from another machine.
struct CrossMachineEdge {
  int64_t src_machine = 0;
  int64_t dst_machine = 0;
  std::string what;  // lbn, or "ctrl"
  int64_t bytes = 0;  // per copy
  CrossMachineStrategy strategy = CM_NONE;
  int64_t src_regst_desc_id = 0;
  int64_t commnet_task_id = 0;
};

struct ZoneMemory {
  MemZoneId zone;
  int64_t size = 0;
  int64_t bytes_without_reuse = 0;
  int64_t regst_count = 0;
  // Bytes of the zone's persistent registers (variables: model and
  // optimizer state), every copy counted; part of `size`.
  int64_t variable_bytes = 0;
};

struct MachineSummary {
  int64_t machine_id = 0;
  std::map<TaskType, int> actors;
  int actor_count = 0;
  int regst_count = 0;
  std::set<std::string> devices;  // "cpu:0", "cuda:1"
  std::vector<ZoneMemory> memory;
};

// One SBP conversion: (kind, lbn, in sbp, out sbp); tasks counts its tasks.
struct BoxingConversion {
  BoxingKind kind = BOXING_NONE;
  std::string lbn;
  std::string in_sbp;
  std::string out_sbp;
  bool spans_machines = false;  // lowered to TASK_COLLECTIVE
  // TASK_COLLECTIVE: the compiled algorithm and ring buffer bytes (the same
  // for every task of one collective).
  CollectiveAlgorithm algorithm = COLLECTIVE_UNSET;
  int64_t buffer_bytes = 0;
  // A fused bucket (CollectiveConf.member; lbn is the bucket's label): the
  // logical blobs it all-reduces, in buffer order. Empty otherwise.
  std::vector<std::string> members;
  // Of the members, P -> S reduce-scatters and S -> B all-gathers run as
  // the bucket's all-reduce (CollectiveMember.in_sbp / out_sbp).
  int member_reduce_scatters = 0;
  int member_all_gathers = 0;
  int tasks = 0;
  // n-D SBP (BoxingConf.hierarchy set; empty otherwise): the hierarchy
  // ("2x2"), the axis converted, the whole layouts before and after
  // ("(S(0), P)") and the sub-groups the step ran on ("{0,2}"), in order of
  // their first parallel id.
  std::string hierarchy;
  int64_t axis = 0;
  std::string nd_in_sbp;
  std::string nd_out_sbp;
  std::vector<std::string> groups;
};

// The n-D SBP of one tensor on a hierarchical placement, as its producing
// op's kernels record it (KernelConf.output_sbp).
struct NdTensorLayout {
  std::string lbn;
  std::string hierarchy;  // "2x2"
  std::string sbp;        // "(S(0), B)"
};

struct PlanSummary {
  std::vector<MachineSummary> machines;
  std::map<TaskType, int> actors;  // over all machines
  int actor_count = 0;
  int regst_count = 0;
  std::vector<BoxingConversion> boxing;  // sorted by (lbn, kind)
  std::vector<CrossMachineEdge> cross_machine_edges;  // sorted by commnet task id
  std::vector<NdTensorLayout> nd_tensors;  // sorted by lbn; empty in flat plans
};

PlanSummary Summarize(const Plan& plan);

// "m0/host", "m0/pinned", "m1/cuda:0".
std::string ZoneName(const MemZoneId& zone);
// "compute", "boxing", ... (TaskType without the prefix, lower case).
std::string TaskTypeShortName(TaskType type);
// "all_reduce", ...
std::string BoxingKindName(BoxingKind kind);
// "(S(0), B)"; a single entry prints flat: "S(0)".
std::string NdSbpText(const NdSbp& sbp);
// "all_to_all", "ring_all_reduce", ... ("unset" for COLLECTIVE_UNSET).
std::string CollectiveAlgorithmName(CollectiveAlgorithm algorithm);
// "zero-copy", "bounce", "-".
std::string StrategyName(CrossMachineStrategy strategy);
// "1.5 MiB".
std::string HumanBytes(int64_t bytes);
// Number of boxing conversions of a kind.
int CountBoxing(const PlanSummary& summary, BoxingKind kind);
// Finds a register desc by id anywhere in the plan (null if absent).
const RegstDescProto* FindRegst(const Plan& plan, int64_t regst_desc_id);
// Finds a task by id (null if absent).
const TaskProto* FindTask(const Plan& plan, int64_t task_id);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_PLAN_SUMMARY_H_
