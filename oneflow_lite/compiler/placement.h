// Placements and clusters: validating a cluster description, and checking
// that a placement names only machines and devices the cluster has.
//
// Text form (docs/plan_format.md, common/placement_text.h):
// "MACHINES:TYPE:DEVICES[@HIERARCHY]", e.g. "0:cpu:0", "0-1:cuda:0-3",
// "0,2:cpu:1", "0-1:cpu:0-1@2x2". Parallel ids run machine-major (machines
// ascending, then device ids ascending).
// All functions are pure and thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_PLACEMENT_H_
#define ONEFLOW_LITE_COMPILER_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/placement_text.h"
#include "oneflow_lite/common/status.h"
#include "proto/cluster.pb.h"
#include "proto/common.pb.h"

namespace oflite {
namespace compiler {

// One device of a placement.
struct DeviceRef {
  int64_t machine = 0;
  DeviceType type = DEVICE_CPU;
  int64_t index = 0;

  bool operator==(const DeviceRef& o) const {
    return machine == o.machine && type == o.type && index == o.index;
  }
  bool operator!=(const DeviceRef& o) const { return !(*this == o); }
  bool operator<(const DeviceRef& o) const;
  std::string ToString() const;  // "m0:cpu:1"
};

// The text form is parsed and printed by common/placement_text.h
// (ParsePlacementText, PlacementToString), shared with the graph API.
using ::oflite::ParsePlacementText;
using ::oflite::PlacementToString;

// Checks ids are dense 0..N-1 and counts non-negative; errors name the field
// ("machine[1].id").
Status ValidateCluster(const ClusterProto& cluster);
// "2 machines: m0 (cpu 2, cuda 0), m1 (cpu 2, cuda 0)".
std::string ClusterToString(const ClusterProto& cluster);

// Checks the placement against the cluster: sorted unique ids, a known device
// type, every (machine, device) present, the hierarchy's product. Errors name
// the missing machine/device and the cluster.
Status ValidatePlacement(const PlacementProto& placement, const ClusterProto& cluster);

// Devices in parallel-id order.
std::vector<DeviceRef> PlacementDevices(const PlacementProto& placement);
int64_t ParallelNum(const PlacementProto& placement);
// Same devices in the same order and the same hierarchy (a 1-axis hierarchy
// equals none).
bool PlacementEqual(const PlacementProto& a, const PlacementProto& b);
// True when every device of the placement is on one machine.
bool IsSingleMachine(const PlacementProto& placement);
// True when the placement carries a hierarchy of 2 or more axes (n-D SBP,
// docs/compiler.md); a 1-axis hierarchy is the flat placement.
bool IsHierarchical(const PlacementProto& placement);
// The hierarchy axes: the placement's hierarchy when it is hierarchical,
// else one axis of ParallelNum devices.
std::vector<int64_t> PlacementHierarchy(const PlacementProto& placement);
// "2x2" (or "4" for a flat placement of 4).
std::string HierarchyToString(const std::vector<int64_t>& hierarchy);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_PLACEMENT_H_
