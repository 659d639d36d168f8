// The text summary of a Plan that `oflite inspect PLAN` prints by default:
// the plan's settings, register-edge ordering and CUDA graph replay, a table
// per machine, actors by kind, memory per zone, boxing conversions (with the
// compiled collective algorithms and fused buckets) and cross-machine edges.
// Used by `oflite inspect` (tools/oflite/inspect_cmd.cc) and by the training
// driver (tools/driver/trainer.cc), which prints the plan it trains, so both
// print the same text without the driver depending on the CLI. Built on
// Summarize (plan_summary.h). The helpers after PrintPlanSummary are the
// parts of the summary that inspect's --json view prints too, so each has
// one definition. Reads only the Plan proto; thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_PLAN_SUMMARY_TEXT_H_
#define ONEFLOW_LITE_COMPILER_PLAN_SUMMARY_TEXT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "proto/plan.pb.h"

namespace oflite {
namespace compiler {

// Writes the summary of `plan` (Summarize(plan)) to `out`.
void PrintPlanSummary(std::FILE* out, const Plan& plan);

// Register edges by consumer_sync (docs/runtime.md, "Stream order"):
// {stream-ordered, event (or unset)}.
std::pair<int, int> EdgeSyncCounts(const Plan& plan);

// The merged compute tasks the runtime may capture and replay, one per level
// of a GPU's compute stream (TaskProto.graph_replay, compiler/graph_merge.h),
// in plan order. The pointers point into `plan`.
std::vector<const TaskProto*> ReplayedTasks(const Plan& plan);

// The address of a machine in the plan's cluster, "-" if it has none or the
// machine is not in the cluster.
std::string Address(const Plan& plan, int64_t machine);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_PLAN_SUMMARY_TEXT_H_
