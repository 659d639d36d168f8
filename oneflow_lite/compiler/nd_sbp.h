// n-D SBP layouts on hierarchical placements (docs/compiler.md, "n-D SBP").
//
// A layout is an NdSbp with one SbpParallel per hierarchy axis (a flat
// placement is the 1-axis hierarchy [N]). A device's part is the logical
// tensor cut axis by axis, outer first (common/nd_sbp_view.h). Two axes
// may split only different tensor axes: nested splits of one tensor axis
// are refused (NestedSplitConflict), which also makes the order of the cuts
// irrelevant, so "the tensor as split by every axis but k" is well defined.
//
// A conversion between two layouts is a sequence of 1-D steps, each on one
// hierarchy axis k: every sub-group (the devices whose other coordinates
// are fixed; h_k of them) runs the 1-D boxing of BoxingPath over the tensor
// as split by the other axes, with parallel_num h_k. NdBoxingPath orders the
// steps so that every intermediate layout is valid: reductions (P on the
// source side) first, so that later steps move reduced bytes, then the
// other axes; an axis whose direct conversion would nest two splits of one
// tensor axis goes through B, and its split is made (locally) at the end.
// Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_ND_SBP_H_
#define ONEFLOW_LITE_COMPILER_ND_SBP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/compiler/sbp_deduction.h"
#include "proto/common.pb.h"

namespace oflite {
namespace compiler {

using Hierarchy = std::vector<int64_t>;

NdSbp ToNdSbp(const SbpParallel& sbp);
// The same SBP on each of `rank` axes.
NdSbp UniformNdSbp(const SbpParallel& sbp, size_t rank);
NdSbp AllBroadcastNdSbp(size_t rank);
// Per axis NormalizeSbp with the axis size (an axis of 1 device is B).
NdSbp NormalizeNdSbp(const NdSbp& sbp, const Hierarchy& hierarchy);
bool NdSbpEqual(const NdSbp& a, const NdSbp& b);
// "(S(0), B)"; one entry prints as the flat form "S(0)".
std::string NdSbpToString(const NdSbp& sbp);

// Empty when no two axes split one tensor axis; else the reason, e.g.
// "hierarchy axes 0 and 1 both split tensor axis 0".
std::string NestedSplitConflict(const NdSbp& sbp);

// The part of `logical` at `parallel_id` (nd: one entry per axis).
TensorDesc NdPhysicalDesc(const TensorDesc& logical, const NdSbp& sbp, const Hierarchy& hierarchy,
                          int64_t parallel_id);
// `logical` as split by every axis but `axis`, at `parallel_id`'s
// coordinates: what the 1-D boxing of a sub-group runs over.
TensorDesc SubGroupLogicalDesc(const TensorDesc& logical, const NdSbp& sbp,
                               const Hierarchy& hierarchy, int axis, int64_t parallel_id);
// Empty when `sbp` fits `logical` (every split in range, at least one row
// per device of its axis, no nested split); else why not.
std::string NdSbpMisfit(const TensorDesc& logical, const NdSbp& sbp, const Hierarchy& hierarchy);

// The parallel ids of the sub-group of `axis` that holds `parallel_id`, by
// coordinate on `axis` (index = the 1-D parallel id inside the group).
std::vector<int64_t> SubGroup(const Hierarchy& hierarchy, int axis, int64_t parallel_id);
// Every sub-group of `axis`, ordered by their first parallel id.
std::vector<std::vector<int64_t>> SubGroups(const Hierarchy& hierarchy, int axis);

// One 1-D step of an n-D conversion.
struct NdBoxingStep {
  int axis = 0;
  BoxingStep step;  // 1-D, over the axis's sub-groups
  NdSbp before;     // the whole layout before and after the step
  NdSbp after;
};
// The steps from `from` to `to` (both valid, normalized or not); empty when
// equal.
std::vector<NdBoxingStep> NdBoxingPath(const NdSbp& from, const NdSbp& to,
                                       const Hierarchy& hierarchy);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_ND_SBP_H_
