#include "oneflow_lite/ops/sbp.h"

namespace oflite {

SbpParallel SplitSbp(int64_t axis) {
  SbpParallel s;
  s.set_split_axis(axis);
  return s;
}

SbpParallel BroadcastSbp() {
  SbpParallel s;
  s.set_broadcast(true);
  return s;
}

SbpParallel PartialSumSbp() {
  SbpParallel s;
  s.set_partial_sum(true);
  return s;
}

bool IsSplit(const SbpParallel& sbp) { return sbp.parallel_type_case() == SbpParallel::kSplitAxis; }
bool IsBroadcast(const SbpParallel& sbp) {
  return sbp.parallel_type_case() == SbpParallel::kBroadcast;
}
bool IsPartialSum(const SbpParallel& sbp) {
  return sbp.parallel_type_case() == SbpParallel::kPartialSum;
}

bool SbpEqual(const SbpParallel& a, const SbpParallel& b) {
  if (a.parallel_type_case() != b.parallel_type_case()) return false;
  return !IsSplit(a) || a.split_axis() == b.split_axis();
}

std::string SbpToString(const SbpParallel& sbp) {
  if (IsSplit(sbp)) return "S(" + std::to_string(sbp.split_axis()) + ")";
  if (IsBroadcast(sbp)) return "B";
  if (IsPartialSum(sbp)) return "P";
  return "?";
}

std::string SbpSignature::ToString() const {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + SbpToString(inputs[i]);
  s += " -> ";
  for (size_t i = 0; i < outputs.size(); ++i) s += (i ? ", " : "") + SbpToString(outputs[i]);
  return s;
}

SbpSignature AllBroadcastSignature(int num_inputs, int num_outputs) {
  SbpSignature sig;
  sig.inputs.assign(num_inputs, BroadcastSbp());
  sig.outputs.assign(num_outputs, BroadcastSbp());
  return sig;
}

int64_t ShardAxis(const Shape& shape, int64_t parallel_num) {
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (shape.dim(axis) >= parallel_num) return axis;
  }
  return -1;
}

}  // namespace oflite
