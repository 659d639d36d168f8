#include "oneflow_lite/compiler/placement.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "oneflow_lite/common/data_type.h"

namespace oflite {
namespace compiler {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

StatusOr<int64_t> ParseNumber(const std::string& text, const std::string& whole) {
  if (text.empty() || text.size() > 9 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(c); })) {
    return InvalidArgumentError("placement '", whole, "': '", text, "' is not a number");
  }
  return std::stoll(text);
}

// "0-3" or "0,2,5" or "1": ascending, unique.
StatusOr<std::vector<int64_t>> ParseIdList(const std::string& text, const std::string& whole) {
  std::vector<int64_t> ids;
  for (const std::string& item : Split(text, ',')) {
    size_t dash = item.find('-');
    if (dash == std::string::npos) {
      ASSIGN_OR_RETURN(int64_t v, ParseNumber(item, whole));
      ids.push_back(v);
      continue;
    }
    ASSIGN_OR_RETURN(int64_t lo, ParseNumber(item.substr(0, dash), whole));
    ASSIGN_OR_RETURN(int64_t hi, ParseNumber(item.substr(dash + 1), whole));
    if (hi < lo) return InvalidArgumentError("placement '", whole, "': empty range '", item, "'");
    for (int64_t v = lo; v <= hi; ++v) ids.push_back(v);
  }
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] <= ids[i - 1]) {
      return InvalidArgumentError("placement '", whole, "': ids in '", text,
                                  "' must be ascending and unique");
    }
  }
  return ids;
}

std::string IdListToString(const google::protobuf::RepeatedField<int64_t>& ids) {
  std::string out;
  for (int i = 0; i < ids.size();) {
    int j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

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

StatusOr<PlacementProto> ParsePlacement(const std::string& text) {
  std::string body = text;
  std::string hierarchy;
  size_t at = text.find('@');
  if (at != std::string::npos) {
    body = text.substr(0, at);
    hierarchy = text.substr(at + 1);
    if (hierarchy.empty()) {
      return InvalidArgumentError("placement '", text, "': empty hierarchy after '@'");
    }
  }
  std::vector<std::string> fields = Split(body, ':');
  if (fields.size() != 3) {
    return InvalidArgumentError("placement '", text,
                                "': expected MACHINES:TYPE:DEVICES such as '0-1:cuda:0-3'");
  }
  PlacementProto p;
  if (fields[1] == "cpu") {
    p.set_device_type(DEVICE_CPU);
  } else if (fields[1] == "cuda" || fields[1] == "gpu") {
    p.set_device_type(DEVICE_CUDA);
  } else {
    return InvalidArgumentError("placement '", text, "': unknown device type '", fields[1],
                                "' (cpu or cuda)");
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> machines, ParseIdList(fields[0], text));
  ASSIGN_OR_RETURN(std::vector<int64_t> devices, ParseIdList(fields[2], text));
  for (int64_t m : machines) p.add_machine_id(m);
  for (int64_t d : devices) p.add_device_id(d);
  if (!hierarchy.empty()) {
    for (const std::string& dim : Split(hierarchy, 'x')) {
      ASSIGN_OR_RETURN(int64_t v, ParseNumber(dim, text));
      p.mutable_hierarchy()->add_dim(v);
    }
  }
  return p;
}

std::string PlacementToString(const PlacementProto& p) {
  std::string out = IdListToString(p.machine_id()) + ":" + DeviceTypeName(p.device_type()) + ":" +
                    IdListToString(p.device_id());
  if (p.hierarchy().dim_size() > 0) {
    out += "@";
    for (int i = 0; i < p.hierarchy().dim_size(); ++i) {
      out += (i ? "x" : "") + std::to_string(p.hierarchy().dim(i));
    }
  }
  return out;
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
  const std::string text = PlacementToString(p);
  if (p.device_type() != DEVICE_CPU && p.device_type() != DEVICE_CUDA) {
    return InvalidArgumentError("placement '", text, "': no device type");
  }
  if (p.machine_id_size() == 0 || p.device_id_size() == 0) {
    return InvalidArgumentError("placement '", text, "': no machine or no device");
  }
  for (int i = 1; i < p.machine_id_size(); ++i) {
    if (p.machine_id(i) <= p.machine_id(i - 1)) {
      return InvalidArgumentError("placement '", text, "': machine ids not ascending");
    }
  }
  for (int i = 1; i < p.device_id_size(); ++i) {
    if (p.device_id(i) <= p.device_id(i - 1)) {
      return InvalidArgumentError("placement '", text, "': device ids not ascending");
    }
  }
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
  if (p.hierarchy().dim_size() > 0) {
    int64_t product = 1;
    for (int64_t d : p.hierarchy().dim()) product *= d;
    if (product != ParallelNum(p)) {
      return InvalidArgumentError("placement '", text, "': hierarchy multiplies to ", product,
                                  " but the placement has ", ParallelNum(p), " devices");
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
                    b.device_id().end());
}

bool IsSingleMachine(const PlacementProto& p) { return p.machine_id_size() == 1; }

}  // namespace compiler
}  // namespace oflite
