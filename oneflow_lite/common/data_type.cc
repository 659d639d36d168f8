#include "oneflow_lite/common/data_type.h"

namespace oflite {

int64_t SizeOf(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT: return 4;
    case DT_DOUBLE: return 8;
    case DT_INT32: return 4;
    case DT_INT64: return 8;
    case DT_INT8: return 1;
    case DT_UINT8: return 1;
    case DT_BOOL: return 1;
    default: return 0;
  }
}

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT: return "float32";
    case DT_DOUBLE: return "float64";
    case DT_INT32: return "int32";
    case DT_INT64: return "int64";
    case DT_INT8: return "int8";
    case DT_UINT8: return "uint8";
    case DT_BOOL: return "bool";
    default: return "invalid";
  }
}

const char* DeviceTypeName(DeviceType device) {
  switch (device) {
    case DEVICE_CPU: return "cpu";
    case DEVICE_CUDA: return "cuda";
    default: return "invalid";
  }
}

}  // namespace oflite
