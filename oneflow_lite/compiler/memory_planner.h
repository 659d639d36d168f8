// Memory planning: per machine, a topological task order, register
// lifetimes, and offsets of every register copy inside one block per memory
// zone, with reuse between registers whose lifetimes cannot overlap at run
// time; and a checker that proves a plan's layout safe.
//
// Reuse rule (docs/plan_format.md, "Memory plan"): registers with regst_num
// 1, not persistent, not control, not read by another machine, produced on
// the same device, may share bytes when every user of the earlier one is a
// strict ancestor of the later one's producer; the earlier register's
// producer must then be held back until every user of the later one is done
// with the iteration, so the next iteration cannot overwrite the later
// register while it is still read. A producer is held back by the consumers
// of its registers with regst_num 1 (it acts only with a free copy of each),
// and a user is done once it, or a task it reaches within the iteration,
// has returned such a register. The planner adds a control register
// ("ctrl_mem") from the producer to the users not yet covered, less those
// that reach another of them. Planning and checking are deterministic and
// single-threaded.
#ifndef ONEFLOW_LITE_COMPILER_MEMORY_PLANNER_H_
#define ONEFLOW_LITE_COMPILER_MEMORY_PLANNER_H_

#include <cstdint>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/compiler/task_graph.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace compiler {

struct MemoryPlanOptions {
  bool enable_reuse = true;
};

// Fills topo_order of every task, lifetime and mem_offset of every register
// (adding ctrl_mem registers), and returns the blocks sorted by machine and
// zone.
StatusOr<std::vector<MemBlockProto>> PlanMemory(TaskGraph* graph, const MemoryPlanOptions& options);

// Verifies a plan's memory layout: every copy inside its zone's block, and
// any two registers whose bytes overlap satisfy the reuse rule above
// (including the control registers). Errors name both registers.
Status CheckMemoryPlan(const Plan& plan);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_MEMORY_PLANNER_H_
