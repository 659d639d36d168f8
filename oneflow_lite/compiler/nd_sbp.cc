#include "oneflow_lite/compiler/nd_sbp.h"

#include "oneflow_lite/common/nd_sbp_view.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace compiler {
namespace {

const SbpParallel& AxisSbp(const NdSbp& sbp, int axis) { return sbp.sbp(axis); }

NdSbp WithAxis(NdSbp sbp, int axis, const SbpParallel& value) {
  *sbp.mutable_sbp(axis) = value;
  return sbp;
}

// Appends the 1-D steps turning axis `axis` of *cur into `to`.
void AppendAxisSteps(int axis, const SbpParallel& to, const Hierarchy& hierarchy, NdSbp* cur,
                     std::vector<NdBoxingStep>* steps) {
  for (const BoxingStep& step : BoxingPath(AxisSbp(*cur, axis), to, hierarchy[axis])) {
    NdBoxingStep nd;
    nd.axis = axis;
    nd.step = step;
    nd.before = *cur;
    *cur = WithAxis(*cur, axis, step.out);
    nd.after = *cur;
    steps->push_back(std::move(nd));
  }
}

}  // namespace

NdSbp ToNdSbp(const SbpParallel& sbp) {
  NdSbp nd;
  *nd.add_sbp() = sbp;
  return nd;
}

NdSbp UniformNdSbp(const SbpParallel& sbp, size_t rank) {
  NdSbp nd;
  for (size_t k = 0; k < rank; ++k) *nd.add_sbp() = sbp;
  return nd;
}

NdSbp AllBroadcastNdSbp(size_t rank) { return UniformNdSbp(BroadcastSbp(), rank); }

NdSbp NormalizeNdSbp(const NdSbp& sbp, const Hierarchy& hierarchy) {
  NdSbp nd;
  for (size_t k = 0; k < hierarchy.size(); ++k) {
    SbpParallel s = static_cast<int>(k) < sbp.sbp_size() ? sbp.sbp(static_cast<int>(k))
                                                         : SbpParallel();
    *nd.add_sbp() = NormalizeSbp(s, hierarchy[k]);
  }
  return nd;
}

bool NdSbpEqual(const NdSbp& a, const NdSbp& b) {
  if (a.sbp_size() != b.sbp_size()) return false;
  for (int k = 0; k < a.sbp_size(); ++k) {
    if (!SbpEqual(a.sbp(k), b.sbp(k))) return false;
  }
  return true;
}

std::string NdSbpToString(const NdSbp& sbp) {
  if (sbp.sbp_size() == 1) return SbpToString(sbp.sbp(0));
  std::string text = "(";
  for (int k = 0; k < sbp.sbp_size(); ++k) text += (k ? ", " : "") + SbpToString(sbp.sbp(k));
  return text + ")";
}

std::string NestedSplitConflict(const NdSbp& sbp) {
  for (int a = 0; a < sbp.sbp_size(); ++a) {
    if (!IsSplit(sbp.sbp(a))) continue;
    for (int b = a + 1; b < sbp.sbp_size(); ++b) {
      if (IsSplit(sbp.sbp(b)) && sbp.sbp(b).split_axis() == sbp.sbp(a).split_axis()) {
        return "hierarchy axes " + std::to_string(a) + " and " + std::to_string(b) +
               " both split tensor axis " + std::to_string(sbp.sbp(a).split_axis()) +
               " (nested splits of one tensor axis are not supported)";
      }
    }
  }
  return "";
}

TensorDesc NdPhysicalDesc(const TensorDesc& logical, const NdSbp& sbp, const Hierarchy& hierarchy,
                          int64_t parallel_id) {
  const std::vector<int64_t> coordinates = HierarchyCoordinates(hierarchy, parallel_id);
  TensorDesc desc = logical;
  for (size_t k = 0; k < hierarchy.size(); ++k) {
    desc = PhysicalDesc(desc, sbp.sbp(static_cast<int>(k)), hierarchy[k], coordinates[k]);
  }
  return desc;
}

TensorDesc SubGroupLogicalDesc(const TensorDesc& logical, const NdSbp& sbp,
                               const Hierarchy& hierarchy, int axis, int64_t parallel_id) {
  const std::vector<int64_t> coordinates = HierarchyCoordinates(hierarchy, parallel_id);
  TensorDesc desc = logical;
  for (size_t k = 0; k < hierarchy.size(); ++k) {
    if (static_cast<int>(k) == axis) continue;
    desc = PhysicalDesc(desc, sbp.sbp(static_cast<int>(k)), hierarchy[k], coordinates[k]);
  }
  return desc;
}

std::string NdSbpMisfit(const TensorDesc& logical, const NdSbp& sbp, const Hierarchy& hierarchy) {
  std::string conflict = NestedSplitConflict(sbp);
  if (!conflict.empty()) return conflict;
  TensorDesc desc = logical;
  for (size_t k = 0; k < hierarchy.size(); ++k) {
    const SbpParallel& s = sbp.sbp(static_cast<int>(k));
    if (!SbpFits(desc, s, hierarchy[k])) {
      return "axis " + std::to_string(k) + " (" + std::to_string(hierarchy[k]) +
             " devices) cannot lay out " + desc.ToString() + " as " + SbpToString(s);
    }
    // The smallest part goes on to the next axis.
    desc = PhysicalDesc(desc, s, hierarchy[k], hierarchy[k] - 1);
  }
  return "";
}

std::vector<int64_t> SubGroup(const Hierarchy& hierarchy, int axis, int64_t parallel_id) {
  std::vector<int64_t> coordinates = HierarchyCoordinates(hierarchy, parallel_id);
  std::vector<int64_t> group;
  for (int64_t c = 0; c < hierarchy[axis]; ++c) {
    coordinates[axis] = c;
    group.push_back(HierarchyParallelId(hierarchy, coordinates));
  }
  return group;
}

std::vector<std::vector<int64_t>> SubGroups(const Hierarchy& hierarchy, int axis) {
  int64_t n = 1;
  for (int64_t h : hierarchy) n *= h;
  std::vector<std::vector<int64_t>> groups;
  for (int64_t p = 0; p < n; ++p) {
    if (HierarchyCoordinates(hierarchy, p)[axis] == 0) groups.push_back(SubGroup(hierarchy, axis, p));
  }
  return groups;
}

std::vector<NdBoxingStep> NdBoxingPath(const NdSbp& from, const NdSbp& to,
                                       const Hierarchy& hierarchy) {
  NdSbp cur = NormalizeNdSbp(from, hierarchy);
  const NdSbp target = NormalizeNdSbp(to, hierarchy);
  const int rank = static_cast<int>(hierarchy.size());
  std::vector<int> order;
  for (int k = 0; k < rank; ++k) {
    if (IsPartialSum(cur.sbp(k))) order.push_back(k);
  }
  for (int k = 0; k < rank; ++k) {
    if (!IsPartialSum(cur.sbp(k))) order.push_back(k);
  }
  std::vector<NdBoxingStep> steps;
  for (int k : order) {
    if (SbpEqual(cur.sbp(k), target.sbp(k))) continue;
    if (NestedSplitConflict(WithAxis(cur, k, target.sbp(k))).empty()) {
      AppendAxisSteps(k, target.sbp(k), hierarchy, &cur, &steps);
    } else {
      AppendAxisSteps(k, BroadcastSbp(), hierarchy, &cur, &steps);  // split at the end
    }
  }
  for (int k = 0; k < rank; ++k) {
    if (!SbpEqual(cur.sbp(k), target.sbp(k))) AppendAxisSteps(k, target.sbp(k), hierarchy, &cur, &steps);
  }
  return steps;
}

}  // namespace compiler
}  // namespace oflite
