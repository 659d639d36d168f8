#include "oneflow_lite/kernels/cpu/testing/tensor_values.h"

#include <gtest/gtest.h>

namespace oflite {

std::vector<double> ToDoubles(const HostTensor& t) {
  std::vector<double> v(t.elem_count());
  for (int64_t i = 0; i < t.elem_count(); ++i) {
    switch (t.dtype()) {
      case DT_FLOAT:
        v[i] = t.data<float>()[i];
        break;
      case DT_DOUBLE:
        v[i] = t.data<double>()[i];
        break;
      case DT_INT32:
        v[i] = t.data<int32_t>()[i];
        break;
      case DT_INT64:
        v[i] = static_cast<double>(t.data<int64_t>()[i]);
        break;
      case DT_UINT8:
        v[i] = t.data<uint8_t>()[i];
        break;
      default:
        ADD_FAILURE() << "ToDoubles: unsupported dtype " << DataTypeName(t.dtype());
        return v;  // all zeros: no element was written
    }
  }
  return v;
}

}  // namespace oflite
