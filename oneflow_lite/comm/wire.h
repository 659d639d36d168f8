// CommNet's name for the byte codec of its wire formats. The codec itself
// lives in common/little_endian.h (one codec for every byte format of the
// project); comm code keeps spelling it comm::wire.
#ifndef ONEFLOW_LITE_COMM_WIRE_H_
#define ONEFLOW_LITE_COMM_WIRE_H_

#include "oneflow_lite/common/little_endian.h"

namespace oflite {
namespace comm {
namespace wire = ::oflite::little_endian;
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_WIRE_H_
