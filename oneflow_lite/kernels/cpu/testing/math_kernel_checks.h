// Checks for the math CPU kernel tests (kernels/cpu/math): running one op
// and reading results back as doubles, comparing them with a reference, and
// index arithmetic for reference implementations. Test-only.
// Link target: //oneflow_lite/kernels/cpu/testing:math_kernel_checks (testonly).
#ifndef ONEFLOW_LITE_KERNELS_CPU_TESTING_MATH_KERNEL_CHECKS_H_
#define ONEFLOW_LITE_KERNELS_CPU_TESTING_MATH_KERNEL_CHECKS_H_

#include <string>
#include <vector>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/kernels/cpu/testing/tensor_values.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace math {

// A tensor's values as doubles (tensor_values.h).
using ::oflite::ToDoubles;

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

#endif  // ONEFLOW_LITE_KERNELS_CPU_TESTING_MATH_KERNEL_CHECKS_H_
