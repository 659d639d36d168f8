#include "oneflow_lite/session/eval_support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "oneflow_lite/runtime/variable_stores.h"

namespace oflite {
namespace session {

void MetricSums::Add(const std::string& name, double value) {
  MetricSum& entry = sums_[name];
  entry.count += 1;
  entry.sum += value;
}

void MetricSums::AddSum(const std::string& name, int64_t count, double sum) {
  MetricSum& entry = sums_[name];
  entry.count += count;
  entry.sum += sum;
}

void MetricSums::Merge(const MetricSums& other) {
  for (const auto& [name, entry] : other.sums_) AddSum(name, entry.count, entry.sum);
}

std::map<std::string, double> MetricSums::Means() const {
  std::map<std::string, double> means;
  for (const auto& [name, entry] : sums_) {
    means[name] = entry.count > 0 ? entry.sum / entry.count : 0;
  }
  return means;
}

int64_t MetricSums::count() const {
  int64_t count = 0;
  for (const auto& [name, entry] : sums_) count = std::max(count, entry.count);
  return count;
}

std::string EncodeMetricSums(const MetricSums& sums) {
  std::string text;
  char line[128];
  for (const auto& [name, entry] : sums.sums()) {
    std::snprintf(line, sizeof(line), " %lld %a\n", static_cast<long long>(entry.count),
                  entry.sum);
    text += name;
    text += line;
  }
  return text;
}

StatusOr<MetricSums> DecodeMetricSums(const std::string& text, const std::string& source) {
  MetricSums sums;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::istringstream fields(line);
    std::string name, count_text, sum_text, extra;
    if (!(fields >> name >> count_text >> sum_text) || (fields >> extra)) {
      return DataLossError(source, ": metric line ", number, " '", line,
                           "' is not 'name count sum'");
    }
    char* end = nullptr;
    const long long count = std::strtoll(count_text.c_str(), &end, 10);
    if (*end != '\0' || count < 0) {
      return DataLossError(source, ": metric '", name, "' has count '", count_text, "'");
    }
    const double sum = std::strtod(sum_text.c_str(), &end);
    if (*end != '\0') {
      return DataLossError(source, ": metric '", name, "' has sum '", sum_text, "'");
    }
    sums.AddSum(name, count, sum);
  }
  return sums;
}

void MetricAverager::OnMetrics(int64_t iteration,
                               const std::vector<std::pair<std::string, double>>& metrics) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, value] : metrics) sums_.Add(name, value);
}

MetricSums MetricAverager::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(sums_);
}

Status PartCapturingStore::Save(const VariablePart& part, int64_t completed_iters,
                                const Blob& blob) {
  RETURN_IF_ERROR(inner_->Save(part, completed_iters, blob));
  if (completed_iters != final_iteration_) return Status::OK();
  TrainedPart copy{LayoutOf(part), HostTensor(blob.desc())};
  if (blob.ByteSize() > 0) std::memcpy(copy.value.raw(), blob.raw(), blob.ByteSize());
  std::lock_guard<std::mutex> lock(mutex_);
  parts_[{part.op_name, part.parallel_id}] = std::move(copy);
  return Status::OK();
}

TrainedParts PartCapturingStore::TakeParts() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(parts_);
}

StatusOr<bool> TrainedPartsStore::Restore(const VariablePart& part, Blob* blob) {
  const std::string what = "variable '" + part.op_name + "' part " +
                           std::to_string(part.parallel_id) + " on machine " +
                           std::to_string(machine_id_);
  auto it = parts_->find({part.op_name, part.parallel_id});
  if (it == parts_->end()) {
    return NotFoundError(what, ": this machine trained no such part");
  }
  const PartLayout want = LayoutOf(part);
  const PartLayout& have = it->second.layout;
  if (want.parallel_num != have.parallel_num || want.split_axis != have.split_axis) {
    return InvalidArgumentError(what, ": the evaluation plan splits it ", want.parallel_num,
                                " ways on axis ", want.split_axis, ", training split it ",
                                have.parallel_num, " ways on axis ", have.split_axis);
  }
  const HostTensor& value = it->second.value;
  if (value.shape() != blob->shape() || value.dtype() != blob->dtype()) {
    return InvalidArgumentError(what, " is ", blob->desc().ToString(), ", the trained part is ",
                                value.desc().ToString());
  }
  if (value.ByteSize() > 0) std::memcpy(blob->raw(), value.raw(), value.ByteSize());
  return true;
}

}  // namespace session
}  // namespace oflite
