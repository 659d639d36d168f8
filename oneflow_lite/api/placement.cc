#include "oneflow_lite/api/placement.h"

namespace oflite {

Placement::Placement() {
  proto_.set_device_type(DEVICE_CPU);
  proto_.add_machine_id(0);
  proto_.add_device_id(0);
}

StatusOr<Placement> Placement::Parse(const std::string& text) { return Parse(text, Shape()); }

StatusOr<Placement> Placement::Parse(const std::string& text, const Shape& hierarchy) {
  ASSIGN_OR_RETURN(PlacementProto proto, ParsePlacementText(text));
  if (hierarchy.rank() > 0) {
    if (proto.hierarchy().dim_size() > 0) {
      return InvalidArgumentError("placement '", text, "': hierarchy given twice (in the text and ",
                                  hierarchy, ")");
    }
    hierarchy.ToProto(proto.mutable_hierarchy());
  }
  return FromProto(proto);
}

StatusOr<Placement> Placement::FromProto(const PlacementProto& proto) {
  RETURN_IF_ERROR(CheckPlacementProto(proto));
  return Placement(proto);
}

std::string Placement::ToString() const { return PlacementToString(proto_); }

bool Placement::operator==(const Placement& other) const {
  return proto_.SerializeAsString() == other.proto_.SerializeAsString();
}

}  // namespace oflite
