#include "oneflow_lite/compiler/placement.h"

#include <algorithm>
#include <sstream>

#include "oneflow_lite/common/data_type.h"

namespace oflite {
namespace compiler {
namespace {

int64_t DeviceCount(const MachineProto& m, DeviceType type) {
  return type == DEVICE_CUDA ? m.cuda_devices() : m.cpu_devices();
}

}  // namespace

bool DeviceRef::operator<(const DeviceRef& o) const {
  if (machine != o.machine) return machine < o.machine;
  if (type != o.type) return type < o.type;
  return index < o.index;
}

std::string DeviceRef::ToString() const {
  return "m" + std::to_string(machine) + ":" + DeviceTypeName(type) + ":" + std::to_string(index);
}

Status ValidateCluster(const ClusterProto& cluster) {
  if (cluster.machine_size() == 0) return InvalidArgumentError("cluster: no machine");
  for (int i = 0; i < cluster.machine_size(); ++i) {
    const MachineProto& m = cluster.machine(i);
    std::string field = "cluster: machine[" + std::to_string(i) + "]";
    if (m.id() != i) {
      return InvalidArgumentError(field, ".id is ", m.id(), " but machine ids must be dense "
                                  "and in order (expected ", i, ")");
    }
    if (m.cpu_devices() < 0) return InvalidArgumentError(field, ".cpu_devices is negative");
    if (m.cuda_devices() < 0) return InvalidArgumentError(field, ".cuda_devices is negative");
    if (m.cpu_threads() < 0 || m.cpu_threads() > 1024) {
      return InvalidArgumentError(field, ".cpu_threads ", m.cpu_threads(),
                                  " is out of range (0: automatic, or 1..1024)");
    }
    if (m.cpu_devices() > 255 || m.cuda_devices() > 255) {
      return InvalidArgumentError(field, ": at most 255 devices of a type");
    }
    if (m.port() < 0 || m.port() > 65535) {
      return InvalidArgumentError(field, ".port ", m.port(), " is out of range");
    }
  }
  return Status::OK();
}

std::string ClusterToString(const ClusterProto& cluster) {
  std::ostringstream os;
  os << cluster.machine_size() << " machine(s):";
  for (int i = 0; i < cluster.machine_size(); ++i) {
    const MachineProto& m = cluster.machine(i);
    os << (i ? ", " : " ") << "m" << m.id() << " (cpu " << m.cpu_devices() << ", cuda "
       << m.cuda_devices() << ")";
  }
  return os.str();
}

Status ValidatePlacement(const PlacementProto& p, const ClusterProto& cluster) {
  RETURN_IF_ERROR(CheckPlacementProto(p));
  const std::string text = PlacementToString(p);
  for (int64_t machine : p.machine_id()) {
    if (machine < 0 || machine >= cluster.machine_size()) {
      return InvalidArgumentError("placement '", text, "' names machine ", machine,
                                  " which is not in the cluster (", ClusterToString(cluster), ")");
    }
  }
  for (int64_t machine : p.machine_id()) {
    const MachineProto& m = cluster.machine(machine);
    for (int64_t device : p.device_id()) {
      if (device < 0 || device >= DeviceCount(m, p.device_type())) {
        return InvalidArgumentError("placement '", text, "' names device ",
                                    DeviceTypeName(p.device_type()), ":", device, " on machine ",
                                    machine, " which the cluster does not have (",
                                    ClusterToString(cluster), ")");
      }
    }
  }
  return Status::OK();
}

std::vector<DeviceRef> PlacementDevices(const PlacementProto& p) {
  std::vector<DeviceRef> devices;
  for (int64_t m : p.machine_id()) {
    for (int64_t d : p.device_id()) devices.push_back({m, p.device_type(), d});
  }
  return devices;
}

int64_t ParallelNum(const PlacementProto& p) {
  return static_cast<int64_t>(p.machine_id_size()) * p.device_id_size();
}

bool PlacementEqual(const PlacementProto& a, const PlacementProto& b) {
  return a.device_type() == b.device_type() &&
         std::equal(a.machine_id().begin(), a.machine_id().end(), b.machine_id().begin(),
                    b.machine_id().end()) &&
         std::equal(a.device_id().begin(), a.device_id().end(), b.device_id().begin(),
                    b.device_id().end()) &&
         PlacementHierarchy(a) == PlacementHierarchy(b);
}

bool IsSingleMachine(const PlacementProto& p) { return p.machine_id_size() == 1; }

bool IsHierarchical(const PlacementProto& p) { return p.hierarchy().dim_size() >= 2; }

std::vector<int64_t> PlacementHierarchy(const PlacementProto& p) {
  if (!IsHierarchical(p)) return {ParallelNum(p)};
  return {p.hierarchy().dim().begin(), p.hierarchy().dim().end()};
}

std::string HierarchyToString(const std::vector<int64_t>& hierarchy) {
  std::string text;
  for (size_t k = 0; k < hierarchy.size(); ++k) {
    text += (k == 0 ? "" : "x") + std::to_string(hierarchy[k]);
  }
  return text;
}

}  // namespace compiler
}  // namespace oflite
