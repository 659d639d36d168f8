#include "oneflow_lite/api/placement.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <vector>

#include "oneflow_lite/common/data_type.h"

namespace oflite {
namespace {

std::vector<std::string> SplitString(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return parts;
}

StatusOr<int64_t> ParseId(const std::string& token, const std::string& what,
                          const std::string& text) {
  if (token.empty() || token.size() > 9 ||
      !std::all_of(token.begin(), token.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return InvalidArgumentError("placement '", text, "': bad ", what, " id '", token,
                                "' (want a non-negative number)");
  }
  return std::stoll(token);
}

// "0-3,5" -> {0,1,2,3,5}; ascending, unique.
StatusOr<std::vector<int64_t>> ParseIdList(const std::string& field, const std::string& what,
                                           const std::string& text) {
  if (field.empty()) return InvalidArgumentError("placement '", text, "': empty ", what, " list");
  std::vector<int64_t> ids;
  for (const std::string& item : SplitString(field, ',')) {
    size_t dash = item.find('-');
    if (dash == std::string::npos) {
      ASSIGN_OR_RETURN(int64_t id, ParseId(item, what, text));
      ids.push_back(id);
      continue;
    }
    ASSIGN_OR_RETURN(int64_t low, ParseId(item.substr(0, dash), what, text));
    ASSIGN_OR_RETURN(int64_t high, ParseId(item.substr(dash + 1), what, text));
    if (low > high) {
      return InvalidArgumentError("placement '", text, "': reversed ", what, " range '", item, "'");
    }
    if (high - low >= 4096) {
      return InvalidArgumentError("placement '", text, "': ", what, " range '", item,
                                  "' is too large");
    }
    for (int64_t id = low; id <= high; ++id) ids.push_back(id);
  }
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  auto duplicate = std::adjacent_find(sorted.begin(), sorted.end());
  if (duplicate != sorted.end()) {
    return InvalidArgumentError("placement '", text, "': ", what, " id ", *duplicate,
                                " listed twice");
  }
  return sorted;
}

StatusOr<DeviceType> ParseDeviceType(const std::string& token, const std::string& text) {
  if (token == "cpu") return DEVICE_CPU;
  if (token == "cuda" || token == "gpu") return DEVICE_CUDA;
  return InvalidArgumentError("placement '", text, "': unknown device type '", token,
                              "' (want cpu or cuda)");
}

std::string IdsToString(const google::protobuf::RepeatedField<int64_t>& ids) {
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

Status CheckIds(const google::protobuf::RepeatedField<int64_t>& ids, const std::string& what,
                const std::string& text) {
  if (ids.empty()) return InvalidArgumentError("placement '", text, "': no ", what, " ids");
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) return InvalidArgumentError("placement '", text, "': negative ", what, " id");
    if (i > 0 && ids[i] <= ids[i - 1]) {
      return InvalidArgumentError("placement '", text, "': ", what,
                                  " ids must be ascending and unique");
    }
  }
  return Status::OK();
}

}  // namespace

Placement::Placement() {
  proto_.set_device_type(DEVICE_CPU);
  proto_.add_machine_id(0);
  proto_.add_device_id(0);
}

StatusOr<Placement> Placement::Parse(const std::string& text) { return Parse(text, Shape()); }

StatusOr<Placement> Placement::Parse(const std::string& text, const Shape& hierarchy) {
  std::vector<std::string> fields = SplitString(text, ':');
  if (fields.size() != 3) {
    return InvalidArgumentError("placement '", text,
                                "': want <machines>:<device type>:<device ids>, e.g. "
                                "\"0-1:cuda:0-3\"");
  }
  PlacementProto proto;
  ASSIGN_OR_RETURN(std::vector<int64_t> machines, ParseIdList(fields[0], "machine", text));
  ASSIGN_OR_RETURN(DeviceType device_type, ParseDeviceType(fields[1], text));
  ASSIGN_OR_RETURN(std::vector<int64_t> devices, ParseIdList(fields[2], "device", text));
  proto.set_device_type(device_type);
  for (int64_t id : machines) proto.add_machine_id(id);
  for (int64_t id : devices) proto.add_device_id(id);
  hierarchy.ToProto(proto.mutable_hierarchy());
  return FromProto(proto);
}

StatusOr<Placement> Placement::FromProto(const PlacementProto& proto) {
  const std::string text = PlacementToString(proto);
  if (proto.device_type() != DEVICE_CPU && proto.device_type() != DEVICE_CUDA) {
    return InvalidArgumentError("placement '", text, "': no device type");
  }
  RETURN_IF_ERROR(CheckIds(proto.machine_id(), "machine", text));
  RETURN_IF_ERROR(CheckIds(proto.device_id(), "device", text));
  if (proto.hierarchy().dim_size() > 0) {
    Shape hierarchy(proto.hierarchy());
    int64_t devices = static_cast<int64_t>(proto.machine_id_size()) * proto.device_id_size();
    for (int64_t d : hierarchy.dims()) {
      if (d <= 0) {
        return InvalidArgumentError("placement '", text, "': hierarchy ", hierarchy,
                                    " has a non-positive dimension");
      }
    }
    if (hierarchy.elem_count() != devices) {
      return InvalidArgumentError("placement '", text, "': hierarchy ", hierarchy, " has ",
                                  hierarchy.elem_count(), " devices, the placement has ", devices);
    }
  }
  return Placement(proto);
}

std::string Placement::ToString() const { return PlacementToString(proto_); }

bool Placement::operator==(const Placement& other) const {
  return proto_.SerializeAsString() == other.proto_.SerializeAsString();
}

std::string PlacementToString(const PlacementProto& proto) {
  std::string device = proto.device_type() == DEVICE_CPU    ? "cpu"
                       : proto.device_type() == DEVICE_CUDA ? "cuda"
                                                            : "?";
  std::string out =
      IdsToString(proto.machine_id()) + ":" + device + ":" + IdsToString(proto.device_id());
  if (proto.hierarchy().dim_size() > 0) out += " hierarchy " + Shape(proto.hierarchy()).ToString();
  return out;
}

}  // namespace oflite
