// DataType helpers: element sizes, names, and the C++ type <-> enum mapping
// used by kernel registration.
#ifndef ONEFLOW_LITE_COMMON_DATA_TYPE_H_
#define ONEFLOW_LITE_COMMON_DATA_TYPE_H_

#include <cstdint>
#include <string>

#include "proto/common.pb.h"

namespace oflite {

// Bytes per element; 0 for DT_INVALID.
int64_t SizeOf(DataType dtype);
// "float32", "int64", ...
const char* DataTypeName(DataType dtype);
// "cpu", "cuda".
const char* DeviceTypeName(DeviceType device);

template <typename T>
struct DataTypeOf;
template <> struct DataTypeOf<float> { static constexpr DataType value = DT_FLOAT; };
template <> struct DataTypeOf<double> { static constexpr DataType value = DT_DOUBLE; };
template <> struct DataTypeOf<int32_t> { static constexpr DataType value = DT_INT32; };
template <> struct DataTypeOf<int64_t> { static constexpr DataType value = DT_INT64; };
template <> struct DataTypeOf<int8_t> { static constexpr DataType value = DT_INT8; };
template <> struct DataTypeOf<uint8_t> { static constexpr DataType value = DT_UINT8; };
template <> struct DataTypeOf<bool> { static constexpr DataType value = DT_BOOL; };

template <typename T>
inline constexpr DataType kDataTypeOf = DataTypeOf<T>::value;

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_DATA_TYPE_H_
