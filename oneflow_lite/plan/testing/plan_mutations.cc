#include "oneflow_lite/plan/testing/plan_mutations.h"

#include <cstdint>
#include <limits>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/id.h"

namespace oflite {
namespace testing {

TaskProto* FindTask(Plan* plan, const std::function<bool(const TaskProto&)>& pick) {
  for (MachinePlan& machine : *plan->mutable_machine()) {
    for (TaskProto& task : *machine.mutable_task()) {
      if (pick(task)) return &task;
    }
  }
  return nullptr;
}

std::string TaskLabelForTest(const TaskProto& task) {
  return "task '" + task.name() + "' (" + TaskIdToString(task.task_id()) + ")";
}

bool IsMatmulTask(const TaskProto& task) {
  return task.type() == TASK_COMPUTE && task.kernel_size() > 0 &&
         task.kernel(0).op().op_type() == "matmul" && task.kernel(0).input_size() == 2;
}

namespace {

using Needles = std::vector<std::string>;

// Applies `damage` to the first matmul task; its label leads the needles.
PlanMutation OnMatmul(const std::string& name, const std::string& base,
                      std::function<Needles(Plan*, TaskProto*)> damage) {
  return {name, base, [damage](Plan* plan) -> Needles {
            TaskProto* task = FindTask(plan, IsMatmulTask);
            if (task == nullptr) return {};
            Needles needles = damage(plan, task);
            needles.insert(needles.begin(), TaskLabelForTest(*task));
            return needles;
          }};
}

Needles DropBinding(Plan*, TaskProto* task) {
  const std::string arg = task->kernel(0).input(1).arg();
  task->mutable_kernel(0)->mutable_input()->RemoveLast();
  return {"kernel[0]", "input '" + arg + "'[0] is not bound"};
}

// The output redirected into the register its first input comes from.
Needles WriteForeignRegister(Plan*, TaskProto* task) {
  const int64_t foreign = task->kernel(0).input(0).regst_desc_id();
  task->mutable_kernel(0)->mutable_output(0)->set_regst_desc_id(foreign);
  return {"kernel[0]", ".output[0]", "writes register " + std::to_string(foreign) + " owned by"};
}

Needles DropKernelConf(Plan*, TaskProto* task) {
  task->clear_kernel();
  return {"kernel: a TASK_COMPUTE task has no KernelConf"};
}

std::function<Needles(Plan*, TaskProto*)> SetOffset(int64_t offset) {
  return [offset](Plan*, TaskProto* task) -> Needles {
    task->mutable_produced(0)->set_mem_offset(0, offset);
    return {"produced[0]", ".mem_offset[0]", "outside zone m0/host"};
  };
}

Needles OverflowShape(Plan*, TaskProto* task) {
  ShapeProto* shape = task->mutable_produced(0)->mutable_blob(0)->mutable_desc()->mutable_shape();
  shape->set_dim(0, int64_t{1} << 40);
  shape->set_dim(1, int64_t{1} << 40);
  return {"produced[0]", ".blob[0].desc", "overflows int64 bytes"};
}

// Same bytes, another shape: only the op's inference can tell.
Needles SwapOutputShape(Plan*, TaskProto* task) {
  ShapeProto* shape = task->mutable_produced(0)->mutable_blob(0)->mutable_desc()->mutable_shape();
  const int64_t rows = shape->dim(0);
  shape->set_dim(0, shape->dim(1));
  shape->set_dim(1, rows);
  return {"kernel[0]", ".output ('out'[0])", "but the op infers"};
}

Needles ConsumerOutOfPlan(Plan*, TaskProto* task) {
  const int64_t missing = task->task_id() + 100000;
  task->mutable_produced(0)->add_consumer_task_id(missing);
  return {"produced[0]", ".consumer_task_id", "no task " + TaskIdToString(missing)};
}

Needles DuplicateRegisterId(Plan*, TaskProto* task) {
  const int64_t other = task->kernel(0).input(0).regst_desc_id();
  task->mutable_produced(0)->set_regst_desc_id(other);
  return {"produced[0].regst_desc_id", "is also produced by"};
}

Needles BlobOutsideRegister(Plan*, TaskProto* task) {
  RegstDescProto* regst = task->mutable_produced(0);
  regst->mutable_blob(0)->set_offset(regst->bytes_per_regst() - 4);
  return {"produced[0]", ".blob[0]", "does not fit the register"};
}

Needles DuplicateTaskId(Plan* plan) {
  MachinePlan* machine = plan->mutable_machine(0);
  machine->mutable_task(1)->set_task_id(machine->task(0).task_id());
  return {"task '" + machine->task(1).name() + "'", "task_id",
          "is also the id of " + TaskLabelForTest(machine->task(0))};
}

Needles MachineOutOfCluster(Plan* plan) {
  plan->mutable_machine(0)->set_machine_id(3);
  return {"machine[0]", "machine_id 3 outside the cluster's 1 machines"};
}

// The optimizer update of a variable, no longer listed as its mutator,
// still writes it in place.
Needles UnlistedMutator(Plan* plan) {
  TaskProto* variable = FindTask(plan, [](const TaskProto& t) {
    return t.type() == TASK_VARIABLE && t.produced(0).mutator_task_id_size() > 0;
  });
  if (variable == nullptr) return {};
  const int64_t updater = variable->produced(0).mutator_task_id(0);
  variable->mutable_produced(0)->clear_mutator_task_id();
  const TaskProto* task =
      FindTask(plan, [&](const TaskProto& t) { return t.task_id() == updater; });
  return {TaskLabelForTest(*task), "kernel[0]", "in place but is not one of its mutators"};
}

// Graph replay asked of a task that is not a compute task.
Needles ReplayedVariable(Plan* plan) {
  TaskProto* variable =
      FindTask(plan, [](const TaskProto& t) { return t.type() == TASK_VARIABLE; });
  if (variable == nullptr) return {};
  variable->set_graph_replay(true);
  return {TaskLabelForTest(*variable), "graph_replay",
          "set on a TASK_VARIABLE task; only a TASK_COMPUTE task is replayed"};
}

// A replayed task given an op whose launch arguments follow the iteration
// (a learning-rate schedule on its momentum update): a replay would repeat
// the captured iteration's learning rate.
Needles ReplayedSchedule(Plan* plan) {
  TaskProto* merged = FindTask(plan, [](const TaskProto& t) { return t.graph_replay(); });
  if (merged == nullptr) return {};
  for (KernelConf& kernel : *merged->mutable_kernel()) {
    if (kernel.op().op_type() != "momentum_update") continue;
    SetStringAttr(kernel.mutable_op(), "lr_type", "cosine");
    return {TaskLabelForTest(*merged), "graph_replay", "'" + kernel.op().name() + "'",
            "whose launch arguments follow the iteration"};
  }
  return {};
}

}  // namespace

std::vector<PlanMutation> PlanMutations() {
  return {
      OnMatmul("dropped_binding", "mlp", DropBinding),
      OnMatmul("foreign_register_write", "mlp", WriteForeignRegister),
      OnMatmul("dropped_kernel_conf", "mlp", DropKernelConf),
      OnMatmul("offset_out_of_zone", "mlp", SetOffset(int64_t{1} << 40)),
      OnMatmul("negative_offset", "mlp", SetOffset(-256)),
      OnMatmul("overflowing_offset", "mlp", SetOffset(std::numeric_limits<int64_t>::max() - 16)),
      OnMatmul("overflow_sized_shape", "mlp", OverflowShape),
      OnMatmul("swapped_output_shape", "mlp", SwapOutputShape),
      OnMatmul("consumer_id_out_of_plan", "mlp", ConsumerOutOfPlan),
      OnMatmul("duplicated_register_id", "mlp", DuplicateRegisterId),
      OnMatmul("blob_outside_register", "data_parallel", BlobOutsideRegister),
      {"duplicated_task_id", "pipeline", DuplicateTaskId},
      {"machine_id_out_of_cluster", "mlp", MachineOutOfCluster},
      {"unlisted_mutator", "mlp", UnlistedMutator},
      {"replayed_variable", "cuda_one_gpu", ReplayedVariable},
      {"replayed_lr_schedule", "cuda_one_gpu", ReplayedSchedule},
  };
}

}  // namespace testing
}  // namespace oflite
