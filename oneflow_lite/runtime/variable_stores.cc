#include "oneflow_lite/runtime/variable_stores.h"

namespace oflite {

StatusOr<std::map<std::string, TensorDesc>> PlanVariables(const Plan& plan) {
  std::map<std::string, TensorDesc> descs;
  for (const VariableDesc& variable : plan.variable()) {
    descs[variable.name()] = TensorDesc(variable.desc());
  }
  std::map<std::string, TensorDesc> variables;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      if (task.type() != TASK_VARIABLE || task.kernel_size() == 0) continue;
      const std::string& name = task.kernel(0).op().name();
      auto it = descs.find(name);
      if (it == descs.end()) {
        return InvalidArgumentError("variable '", name, "' (task '", task.name(),
                                    "'): no logical desc in the plan's variable list "
                                    "(Plan.variable)");
      }
      variables[name] = it->second;
    }
  }
  return variables;
}

PartLayout LayoutOf(const VariablePart& part) {
  PartLayout layout;
  layout.parallel_id = part.parallel_id;
  layout.parallel_num = part.parallel_num;
  if (part.parallel_num > 1 && part.sbp.sbp_size() > 0 && part.sbp.sbp(0).has_split_axis()) {
    layout.split_axis = part.sbp.sbp(0).split_axis();
  }
  return layout;
}

CheckpointVariableStore::CheckpointVariableStore(Options options)
    : options_(std::move(options)),
      disk_(ShardedCheckpointStore::Options{options_.save_root, options_.restore_dir,
                                            options_.variables}) {}

StatusOr<bool> CheckpointVariableStore::Restore(const VariablePart& part, Blob* blob) {
  return disk_.RestorePart(part.op_name, LayoutOf(part), blob);
}

Status CheckpointVariableStore::Save(const VariablePart& part, int64_t completed_iters,
                                     const Blob& blob) {
  if (!options_.save_root.empty()) {
    RETURN_IF_ERROR(disk_.SavePart(part.op_name, LayoutOf(part), completed_iters, blob));
  }
  if (completed_iters != options_.final_iteration) return Status::OK();
  auto desc = options_.variables.find(part.op_name);
  if (desc == options_.variables.end()) {
    return InvalidArgumentError("variable '", part.op_name, "' is not in the plan's variables");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = final_.find(part.op_name);
  if (it == final_.end()) it = final_.emplace(part.op_name, HostTensor(desc->second)).first;
  const PartLayout layout = LayoutOf(part);
  if (layout.split_axis < 0 && layout.parallel_id != 0) return Status::OK();
  CopyPartIntoLogical(blob, layout, &it->second);
  return Status::OK();
}

std::map<std::string, HostTensor> CheckpointVariableStore::TakeFinalVariables() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(final_);
}

StatusOr<bool> MemoryVariableStore::Restore(const VariablePart& part, Blob* blob) {
  auto it = variables_->find(part.op_name);
  if (it == variables_->end()) {
    return NotFoundError("variable '", part.op_name, "' has no value to restore");
  }
  const PartLayout layout = LayoutOf(part);
  ASSIGN_OR_RETURN(TensorDesc want, PartDesc(part.op_name, it->second.desc(), layout));
  if (want.shape != blob->shape() || want.dtype != blob->dtype()) {
    return InvalidArgumentError("variable '", part.op_name, "': part ", part.parallel_id,
                                " is ", blob->desc().ToString(), ", the value gives ",
                                want.ToString());
  }
  CopyPartFromLogical(it->second, layout, blob);
  return true;
}

}  // namespace oflite
