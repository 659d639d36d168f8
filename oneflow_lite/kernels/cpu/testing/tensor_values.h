// A host tensor's values as doubles, the common currency of the CPU kernel
// tests: results are compared with references computed in double precision
// (nn_kernel_checks.h, math_kernel_checks.h). Test-only; thread-compatible.
// Link target: //oneflow_lite/kernels/cpu/testing:tensor_values (testonly).
#ifndef ONEFLOW_LITE_KERNELS_CPU_TESTING_TENSOR_VALUES_H_
#define ONEFLOW_LITE_KERNELS_CPU_TESTING_TENSOR_VALUES_H_

#include <vector>

#include "oneflow_lite/common/host_tensor.h"

namespace oflite {

// The values of a float, double, int32, int64 or uint8 tensor as doubles,
// in row-major order. Any other dtype is a test failure (gtest ADD_FAILURE)
// and reads as zeros.
std::vector<double> ToDoubles(const HostTensor& t);

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_TESTING_TENSOR_VALUES_H_
