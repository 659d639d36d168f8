// Test-only helpers for the math kernel tests: running one op and reading
// results back as doubles, index arithmetic for reference implementations.
#ifndef ONEFLOW_LITE_KERNELS_CPU_MATH_MATH_TEST_UTIL_H_
#define ONEFLOW_LITE_KERNELS_CPU_MATH_MATH_TEST_UTIL_H_

#include <string>
#include <vector>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace math {

// Values of a float/double/int32/int64 tensor as doubles.
std::vector<double> ToDoubles(const HostTensor& t);

// Multi-index of flat element `flat` in a row-major `shape`, and back.
std::vector<int64_t> Unravel(int64_t flat, const Shape& shape);
int64_t Ravel(const std::vector<int64_t>& index, const Shape& shape);

// Runs `op` on `env` and returns the output with lbn `out_lbn`; the status
// (with the op's error) if running failed.
StatusOr<HostTensor> RunSingle(const OpConf& op, TensorMap* env, const std::string& out_lbn);

// Element-wise |got - want| <= tol * (1 + |want|); returns a description of
// the first mismatch or "" if all match (and the sizes agree). NaN matches
// only NaN.
std::string CompareValues(const std::vector<double>& got, const std::vector<double>& want,
                          double tol);

// Tolerance suited to the dtype (float32 loose, float64 tight, ints exact).
double Tolerance(DataType dtype);

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_MATH_TEST_UTIL_H_
