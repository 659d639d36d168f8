#include "oneflow_lite/common/nd_sbp_view.h"

namespace oflite {

std::vector<int64_t> HierarchyCoordinates(const std::vector<int64_t>& hierarchy,
                                          int64_t parallel_id) {
  std::vector<int64_t> coordinates(hierarchy.size(), 0);
  for (size_t k = hierarchy.size(); k-- > 0;) {
    coordinates[k] = parallel_id % hierarchy[k];
    parallel_id /= hierarchy[k];
  }
  return coordinates;
}

int64_t HierarchyParallelId(const std::vector<int64_t>& hierarchy,
                            const std::vector<int64_t>& coordinates) {
  int64_t id = 0;
  for (size_t k = 0; k < hierarchy.size(); ++k) id = id * hierarchy[k] + coordinates[k];
  return id;
}

bool NdSbpOneDimView(const std::vector<int64_t>& hierarchy, int64_t parallel_id, const NdSbp& nd,
                     OneDimView* view) {
  if (nd.sbp_size() != static_cast<int>(hierarchy.size())) return false;
  const std::vector<int64_t> coordinates = HierarchyCoordinates(hierarchy, parallel_id);
  int split = -1;
  for (int k = 0; k < nd.sbp_size(); ++k) {
    if (hierarchy[k] <= 1 || !nd.sbp(k).has_split_axis()) continue;
    if (split >= 0) return false;
    split = k;
  }
  OneDimView result;
  if (split < 0) {
    int64_t product = 1;
    for (int64_t h : hierarchy) product *= h;
    result.parallel_id = parallel_id;
    result.parallel_num = product;
    result.sbp.set_broadcast(true);
    result.first_replica = parallel_id == 0;
  } else {
    result.parallel_id = coordinates[split];
    result.parallel_num = hierarchy[split];
    result.sbp = nd.sbp(split);
    for (size_t k = 0; k < coordinates.size(); ++k) {
      if (static_cast<int>(k) != split && coordinates[k] != 0) result.first_replica = false;
    }
  }
  *view = result;
  return true;
}

void KernelOneDimView(const TaskProto& task, const KernelConf& conf, int64_t* parallel_id,
                      int64_t* parallel_num) {
  const ShapeProto& hierarchy = task.parallel_ctx().hierarchy();
  if (hierarchy.dim_size() < 2) return;
  const NdSbp* sbp = conf.output_sbp_size() > 0  ? &conf.output_sbp(0)
                     : conf.input_sbp_size() > 0 ? &conf.input_sbp(0)
                                                 : nullptr;
  OneDimView view;
  if (sbp != nullptr && NdSbpOneDimView({hierarchy.dim().begin(), hierarchy.dim().end()},
                                        *parallel_id, *sbp, &view)) {
    *parallel_id = view.parallel_id;
    *parallel_num = view.parallel_num;
  }
}

}  // namespace oflite
