#include "oneflow_lite/runtime/testing/test_fixtures.h"

#include <cstring>

#include "oneflow_lite/runtime/testing/test_plan_builder.h"

namespace oflite {
namespace testing {

const TensorDesc& TestVector() {
  static const TensorDesc* const desc = new TensorDesc(Shape{5}, DT_FLOAT);
  return *desc;
}

void MetricsRecorder::OnMetrics(int64_t iteration,
                                const std::vector<std::pair<std::string, double>>& metrics) {
  std::lock_guard<std::mutex> lock(mutex);
  order.push_back(iteration);
  for (const auto& [name, value] : metrics) values[name][iteration] = value;
}

std::map<int64_t, double> MetricsRecorder::Values(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = values.find(name);
  return it == values.end() ? std::map<int64_t, double>() : it->second;
}

StatusOr<bool> SnapshotVariableStore::Restore(const VariablePart& part, Blob* blob) {
  std::lock_guard<std::mutex> lock(mutex);
  if (restore_from < 0) return false;
  auto it = saved.find({part.op_name, restore_from});
  if (it == saved.end()) return NotFoundError("no snapshot of ", part.op_name);
  std::memcpy(blob->raw(), it->second.data(), it->second.size() * sizeof(float));
  return true;
}

Status SnapshotVariableStore::Save(const VariablePart& part, int64_t completed,
                                   const Blob& blob) {
  std::lock_guard<std::mutex> lock(mutex);
  const float* data = blob.data<float>();
  saved[{part.op_name, completed}] = std::vector<float>(data, data + blob.elem_count());
  return Status::OK();
}

Plan ChainPlan(int length, int regst_num, int64_t iters) {
  const TensorDesc& vec = TestVector();
  TestPlanBuilder b;
  int64_t prev_task = b.AddTask("source", TASK_SOURCE);
  int64_t prev = b.AddRegst(prev_task, "out", {vec}, regst_num);
  b.AddKernel(prev_task, "source", "test_source", {}, {{"out", prev}});
  for (int i = 0; i < length; ++i) {
    const std::string name = "add" + std::to_string(i);
    const int64_t task = b.AddTask(name, TASK_COMPUTE, i % 2);
    const int64_t out = b.AddRegst(task, "out", {vec}, regst_num);
    b.Consume(task, prev);
    b.AddKernel(task, name, "test_add_one", {{"in", prev}}, {{"out", out}});
    prev = out;
  }
  const int64_t sink = b.AddTask("sink", TASK_SINK);
  b.Consume(sink, prev, "value");
  return b.Build(iters);
}

Plan VariablePlan(int64_t iters) {
  const TensorDesc& vec = TestVector();
  TestPlanBuilder b;
  const int64_t var = b.AddTask("w", TASK_VARIABLE);
  const int64_t var_out = b.AddRegst(var, "out", {vec}, 1);
  b.task(var)->mutable_produced(0)->set_is_persistent(true);
  b.AddKernel(var, "w", "test_init", {}, {{"out", var_out}}, {{"value", 100}});
  const int64_t src = b.AddTask("data", TASK_SOURCE);
  const int64_t src_out = b.AddRegst(src, "out", {vec}, 2);
  b.AddKernel(src, "data", "test_source", {}, {{"out", src_out}});
  const int64_t reader = b.AddTask("reader", TASK_COMPUTE, 1);
  const int64_t reader_out = b.AddRegst(reader, "out", {vec}, 2);
  b.Consume(reader, var_out);
  b.AddKernel(reader, "reader", "test_add_one", {{"in", var_out}}, {{"out", reader_out}});
  const int64_t update = b.AddTask("update", TASK_COMPUTE, 2);
  b.Consume(update, var_out, "model");
  b.MarkMutator(var_out, update);  // the reader goes first
  b.Consume(update, src_out, "in");
  b.AddKernel(update, "update", "test_accumulate", {{"model", var_out}, {"in", src_out}}, {});
  const int64_t sink = b.AddTask("sink", TASK_SINK);
  b.Consume(sink, reader_out, "loss");
  return b.Build(iters);
}

}  // namespace testing
}  // namespace oflite
