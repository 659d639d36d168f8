// The text form of a placement, shared by the graph API (api/placement.h)
// and the compiler (compiler/placement.h): one parser, one printer, one set
// of structural checks.
//
// Text form: "MACHINES:TYPE:DEVICES[@HIERARCHY]". MACHINES and DEVICES are
// comma-separated non-negative ids or inclusive ranges ("0-3,5"); TYPE is
// "cpu" or "cuda" ("gpu" is a synonym); HIERARCHY is dimensions joined by
// 'x' ("2x4"), whose product must be the device count. Every machine uses
// the same device ids. Examples: "0:cpu:0", "0-1:cuda:0-3@2x4",
// "0,2:cpu:1". The canonical form collapses runs into ranges.
//
// Errors are InvalidArgument, quote the whole text and say what is wrong
// (empty list, reversed or huge range, duplicate id, unknown device type,
// bad hierarchy). Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMMON_PLACEMENT_TEXT_H_
#define ONEFLOW_LITE_COMMON_PLACEMENT_TEXT_H_

#include <string>

#include "oneflow_lite/common/status.h"
#include "proto/common.pb.h"

namespace oflite {

// Parses and checks (CheckPlacementProto) the text form.
StatusOr<PlacementProto> ParsePlacementText(const std::string& text);

// Structural checks of a proto: known device type, machine and device ids
// non-empty, non-negative, ascending and unique, hierarchy dimensions
// positive with the device count as product.
Status CheckPlacementProto(const PlacementProto& proto);

// Canonical text ("0-1:cuda:0-3@2x4"); never fails, for error messages too.
std::string PlacementToString(const PlacementProto& proto);

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_PLACEMENT_TEXT_H_
