#include "oneflow_lite/runtime/testing/test_plan_builder.h"

#include "oneflow_lite/common/edge_sync.h"

#include "oneflow_lite/common/id.h"

namespace oflite {
namespace testing {

int64_t TestPlanBuilder::AddTask(const std::string& name, TaskType type, int device_index) {
  TaskIdParts parts;
  parts.stream.machine = 0;
  parts.stream.device_type = DEVICE_CPU;
  parts.stream.device_index = device_index;
  parts.task_index = next_index_[device_index]++;
  const int64_t id = EncodeTaskId(parts).value();
  TaskProto& task = tasks_[id];
  task.set_task_id(id);
  task.set_name(name);
  task.set_type(type);
  task.set_device_type(DEVICE_CPU);
  task.set_device_index(device_index);
  task.mutable_parallel_ctx()->set_parallel_num(1);
  return id;
}

int64_t TestPlanBuilder::AddRegst(int64_t task_id, const std::string& name,
                                  const std::vector<TensorDesc>& blobs, int regst_num) {
  RegstDescProto* desc = tasks_.at(task_id).add_produced();
  desc->set_regst_desc_id(next_regst_++);
  desc->set_name(name);
  desc->set_producer_task_id(task_id);
  desc->set_regst_num(regst_num);
  desc->mutable_zone()->set_type(ZONE_HOST);
  int64_t offset = 0;
  for (const TensorDesc& blob_desc : blobs) {
    BlobInRegst* blob = desc->add_blob();
    blob->set_lbn(tasks_.at(task_id).name() + "/" + name);
    *blob->mutable_desc() = blob_desc.ToProto();
    blob->set_offset(offset);
    blob->set_bytes(blob_desc.ByteSize());
    offset += (blob_desc.ByteSize() + 63) / 64 * 64;
  }
  desc->set_bytes_per_regst(offset);
  return desc->regst_desc_id();
}

void TestPlanBuilder::Consume(int64_t task_id, int64_t regst_desc_id, const std::string& name) {
  TaskProto& task = tasks_.at(task_id);
  for (ConsumedRegst& consumed : *task.mutable_consumed()) {
    if (consumed.name() == name) {
      consumed.add_regst_desc_id(regst_desc_id);
      return;
    }
  }
  ConsumedRegst* consumed = task.add_consumed();
  consumed->set_name(name);
  consumed->add_regst_desc_id(regst_desc_id);
}

void TestPlanBuilder::AddKernel(int64_t task_id, const std::string& op_name,
                                const std::string& op_type,
                                const std::vector<std::pair<std::string, int64_t>>& inputs,
                                const std::vector<std::pair<std::string, int64_t>>& outputs,
                                const std::vector<std::pair<std::string, int64_t>>& int_attrs) {
  KernelConf* conf = tasks_.at(task_id).add_kernel();
  conf->set_dtype(DT_FLOAT);
  OpConf* op = conf->mutable_op();
  op->set_name(op_name);
  op->set_op_type(op_type);
  for (const auto& [key, value] : int_attrs) {
    AttrEntry* attr = op->add_attr();
    attr->set_key(key);
    attr->mutable_value()->set_i(value);
  }
  std::map<std::string, int> counts;
  for (const auto& [arg, regst] : inputs) {
    BlobBinding* binding = conf->add_input();
    binding->set_arg(arg);
    binding->set_index(counts[arg]++);
    binding->set_regst_desc_id(regst);
  }
  counts.clear();
  for (const auto& [arg, regst] : outputs) {
    BlobBinding* binding = conf->add_output();
    binding->set_arg(arg);
    binding->set_index(counts[arg]++);
    binding->set_regst_desc_id(regst);
  }
}

Plan TestPlanBuilder::Build(int64_t total_iters, int64_t seed) {
  std::map<int64_t, RegstDescProto*> descs;
  for (auto& [id, task] : tasks_) {
    for (RegstDescProto& desc : *task.mutable_produced()) descs[desc.regst_desc_id()] = &desc;
  }
  for (auto& [id, task] : tasks_) {
    for (const ConsumedRegst& consumed : task.consumed()) {
      for (int64_t desc_id : consumed.regst_desc_id()) descs.at(desc_id)->add_consumer_task_id(id);
    }
  }
  for (const auto& [desc_id, task_id] : mutators_) descs.at(desc_id)->add_mutator_task_id(task_id);
  if (mark_edge_sync_) {
    for (auto& [desc_id, desc] : descs) {
      const TaskProto& producer = tasks_.at(desc->producer_task_id());
      for (int64_t consumer : desc->consumer_task_id()) {
        desc->add_consumer_sync(RequiredEdgeSync(producer.task_id(), producer.type(), consumer,
                                                 tasks_.at(consumer).type()));
      }
    }
  }
  int64_t offset = 0;
  for (auto& [id, desc] : descs) {
    for (int i = 0; i < desc->regst_num(); ++i) {
      desc->add_mem_offset(offset);
      offset += desc->bytes_per_regst();
    }
  }
  Plan plan;
  plan.set_total_iters(total_iters);
  plan.set_seed(seed);  // run settings are Plan fields; the runtime reads no Job
  MachinePlan* machine = plan.add_machine();
  machine->set_machine_id(0);
  for (auto& [id, task] : tasks_) *machine->add_task() = task;
  MemBlockProto* block = machine->add_mem_block();
  block->mutable_zone()->set_type(ZONE_HOST);
  block->set_size(offset);
  block->set_bytes_without_reuse(offset);
  return plan;
}

}  // namespace testing
}  // namespace oflite
