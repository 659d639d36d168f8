// Hierarchical placements, the facts the compiler and the runtime share
// (docs/compiler.md, "n-D SBP"; docs/plan_format.md, ParallelContext).
//
// A placement of N devices may carry a hierarchy h = [h0, h1, ...] with
// h0 * h1 * ... = N. A parallel id p decomposes row-major into coordinates
// (c0, c1, ...): p = (c0 * h1 + c1) * h2 + c2 ... An n-D SBP has one
// SbpParallel per hierarchy axis; a device's part is the logical tensor cut
// axis by axis, outer axis first, each time by the balanced rule
// (common/partition.h) over h_k parts, index c_k.
//
// Kernels that cut a logical tensor themselves (variable initialisers, data
// sources, dropout masks) know only a 1-D (parallel_id, parallel_num). When
// at most one hierarchy axis splits, the n-D part equals a 1-D part: S(a) on
// axis k is part c_k of h_k along tensor axis a. OneDimView computes it.
// Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMMON_ND_SBP_VIEW_H_
#define ONEFLOW_LITE_COMMON_ND_SBP_VIEW_H_

#include <cstdint>
#include <vector>

#include "proto/common.pb.h"
#include "proto/plan.pb.h"

namespace oflite {

// Row-major coordinates of `parallel_id` (0 <= id < product of hierarchy).
std::vector<int64_t> HierarchyCoordinates(const std::vector<int64_t>& hierarchy,
                                          int64_t parallel_id);
// The inverse: the parallel id at `coordinates`.
int64_t HierarchyParallelId(const std::vector<int64_t>& hierarchy,
                            const std::vector<int64_t>& coordinates);

// A 1-D description of one device's part of an n-D layout.
struct OneDimView {
  int64_t parallel_id = 0;
  int64_t parallel_num = 1;
  SbpParallel sbp;            // the splitting axis's SBP; B when none splits
  bool first_replica = true;  // coordinate 0 on every axis that does not split
};

// The 1-D view of `nd` (one entry per hierarchy axis) at `parallel_id`.
// False when two or more axes split (no 1-D view) or `nd` has the wrong
// length. When no axis splits the view is the whole placement:
// (parallel_id, product, B), first_replica only for parallel id 0.
bool NdSbpOneDimView(const std::vector<int64_t>& hierarchy, int64_t parallel_id, const NdSbp& nd,
                     OneDimView* view);

// The 1-D view a kernel of `task` gets (the runtime's KernelRunner and the
// profiler build kernels alike): on a hierarchical placement, the view of
// the kernel's first output's (else first input's) n-D layout, so kernels
// that cut a logical tensor themselves (variables, data sources) cut the
// right part; `parallel_id` / `parallel_num` unchanged when two axes split
// or the task's placement is flat.
void KernelOneDimView(const TaskProto& task, const KernelConf& conf, int64_t* parallel_id,
                      int64_t* parallel_num);

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_ND_SBP_VIEW_H_
