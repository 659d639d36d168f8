#include "oneflow_lite/common/placement_text.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "oneflow_lite/common/id_ranges.h"

namespace oflite {
namespace {

constexpr int64_t kMaxRange = 4096;

std::vector<std::string> SplitOn(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

StatusOr<int64_t> ParseNumber(const std::string& token, const std::string& what,
                              const std::string& text) {
  if (token.empty() || token.size() > 9 ||
      !std::all_of(token.begin(), token.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return InvalidArgumentError("placement '", text, "': bad ", what, " '", token,
                                "' (want a non-negative number)");
  }
  return std::stoll(token);
}

// "0-3,5" -> {0, 1, 2, 3, 5}, sorted; duplicates are an error.
StatusOr<std::vector<int64_t>> ParseIdList(const std::string& field, const std::string& what,
                                           const std::string& text) {
  if (field.empty()) return InvalidArgumentError("placement '", text, "': empty ", what, " list");
  std::vector<int64_t> ids;
  for (const std::string& item : SplitOn(field, ',')) {
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      ASSIGN_OR_RETURN(int64_t id, ParseNumber(item, what + " id", text));
      ids.push_back(id);
      continue;
    }
    ASSIGN_OR_RETURN(int64_t low, ParseNumber(item.substr(0, dash), what + " id", text));
    ASSIGN_OR_RETURN(int64_t high, ParseNumber(item.substr(dash + 1), what + " id", text));
    if (low > high) {
      return InvalidArgumentError("placement '", text, "': reversed ", what, " range '", item, "'");
    }
    if (high - low >= kMaxRange) {
      return InvalidArgumentError("placement '", text, "': ", what, " range '", item,
                                  "' is too large");
    }
    for (int64_t id = low; id <= high; ++id) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  const auto duplicate = std::adjacent_find(ids.begin(), ids.end());
  if (duplicate != ids.end()) {
    return InvalidArgumentError("placement '", text, "': ", what, " id ", *duplicate,
                                " listed twice");
  }
  return ids;
}

StatusOr<DeviceType> ParseDeviceType(const std::string& token, const std::string& text) {
  if (token == "cpu") return DEVICE_CPU;
  if (token == "cuda" || token == "gpu") return DEVICE_CUDA;
  return InvalidArgumentError("placement '", text, "': unknown device type '", token,
                              "' (want cpu or cuda)");
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

StatusOr<PlacementProto> ParsePlacementText(const std::string& text) {
  std::string body = text;
  std::string hierarchy;
  const size_t at = text.find('@');
  if (at != std::string::npos) {
    body = text.substr(0, at);
    hierarchy = text.substr(at + 1);
    if (hierarchy.empty()) {
      return InvalidArgumentError("placement '", text, "': empty hierarchy after '@'");
    }
  }
  const std::vector<std::string> fields = SplitOn(body, ':');
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
  if (!hierarchy.empty()) {
    for (const std::string& dim : SplitOn(hierarchy, 'x')) {
      ASSIGN_OR_RETURN(int64_t value, ParseNumber(dim, "hierarchy dimension", text));
      proto.mutable_hierarchy()->add_dim(value);
    }
  }
  RETURN_IF_ERROR(CheckPlacementProto(proto));
  return proto;
}

Status CheckPlacementProto(const PlacementProto& proto) {
  const std::string text = PlacementToString(proto);
  if (proto.device_type() != DEVICE_CPU && proto.device_type() != DEVICE_CUDA) {
    return InvalidArgumentError("placement '", text, "': no device type");
  }
  RETURN_IF_ERROR(CheckIds(proto.machine_id(), "machine", text));
  RETURN_IF_ERROR(CheckIds(proto.device_id(), "device", text));
  if (proto.hierarchy().dim_size() == 0) return Status::OK();
  int64_t product = 1;
  for (int64_t dim : proto.hierarchy().dim()) {
    if (dim <= 0) {
      return InvalidArgumentError("placement '", text, "': hierarchy has a non-positive dimension");
    }
    product *= dim;
  }
  const int64_t devices = static_cast<int64_t>(proto.machine_id_size()) * proto.device_id_size();
  if (product != devices) {
    return InvalidArgumentError("placement '", text, "': hierarchy has ", product,
                                " devices, the placement has ", devices);
  }
  return Status::OK();
}

std::string PlacementToString(const PlacementProto& proto) {
  const char* device = proto.device_type() == DEVICE_CPU    ? "cpu"
                       : proto.device_type() == DEVICE_CUDA ? "cuda"
                                                            : "?";
  std::string out = IdRangesText(proto.machine_id()) + ":" + device + ":" +
                    IdRangesText(proto.device_id());
  for (int i = 0; i < proto.hierarchy().dim_size(); ++i) {
    out += (i == 0 ? "@" : "x") + std::to_string(proto.hierarchy().dim(i));
  }
  return out;
}

}  // namespace oflite
