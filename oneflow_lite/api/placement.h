// Placement: the machines and devices an op runs on, parsed from text.
//
// Text form (common/placement_text.h, shared with the compiler):
// "<machines>:<device type>:<device ids>[@<hierarchy>]", where machines and
// device ids are comma-separated numbers or inclusive ranges:
//   "0:cpu:0"        machine 0, CPU device 0
//   "0:cpu:0-1"      machine 0, CPU devices 0 and 1
//   "0-1:cuda:0-3"   machines 0 and 1, CUDA devices 0..3 on each (8 devices)
//   "0,2:cuda:1,3"   machines 0 and 2, CUDA devices 1 and 3 on each
// Device types: "cpu", "cuda" ("gpu" is accepted as a synonym of "cuda").
// Every machine uses the same device ids (PlacementProto's model). An
// optional hierarchy (e.g. {2, 4} for 2 machines x 4 devices) must multiply
// to the device count; it is given either in the text ("0-1:cuda:0-3@2x4")
// or as the Shape argument of Parse, not both.
//
// Placement is an immutable value type wrapping a validated PlacementProto;
// thread-compatible. Parse and FromProto return InvalidArgument errors that
// quote the text and say what is wrong (empty list, reversed range,
// duplicate id, unknown device type, bad hierarchy).
#ifndef ONEFLOW_LITE_API_PLACEMENT_H_
#define ONEFLOW_LITE_API_PLACEMENT_H_

#include <cstdint>
#include <string>

#include "oneflow_lite/common/placement_text.h"
#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "proto/common.pb.h"

namespace oflite {

class Placement {
 public:
  // Default: "0:cpu:0".
  Placement();

  static StatusOr<Placement> Parse(const std::string& text);
  static StatusOr<Placement> Parse(const std::string& text, const Shape& hierarchy);
  // Validates an existing proto (ids ascending and unique, known device
  // type, hierarchy consistent).
  static StatusOr<Placement> FromProto(const PlacementProto& proto);

  const PlacementProto& proto() const { return proto_; }
  DeviceType device_type() const { return proto_.device_type(); }
  int64_t machine_count() const { return proto_.machine_id_size(); }
  int64_t devices_per_machine() const { return proto_.device_id_size(); }
  // Number of devices in total (machines x devices per machine).
  int64_t parallel_num() const { return machine_count() * devices_per_machine(); }
  // Canonical text: ranges collapsed, e.g. "0-1:cuda:0-3@2x4".
  std::string ToString() const;

  bool operator==(const Placement& other) const;
  bool operator!=(const Placement& other) const { return !(*this == other); }

 private:
  explicit Placement(PlacementProto proto) : proto_(std::move(proto)) {}
  PlacementProto proto_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_PLACEMENT_H_
