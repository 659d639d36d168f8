// Checks for the nn CPU kernel tests (kernels/cpu/nn): run one op eagerly
// (oneflow_lite/testing/op_runner.h), compare its outputs with references
// computed in double precision, and differentiate it numerically. The tests
// link the kernels and ops under test themselves. Test-only; single-threaded.
// Link target: //oneflow_lite/kernels/cpu/testing:nn_kernel_checks (testonly).
#ifndef ONEFLOW_LITE_KERNELS_CPU_TESTING_NN_KERNEL_CHECKS_H_
#define ONEFLOW_LITE_KERNELS_CPU_TESTING_NN_KERNEL_CHECKS_H_

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/testing/tensor_values.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace nn {
namespace testing {

// Float dtypes every kernel is registered for.
inline std::vector<DataType> FloatTypes() { return {DT_FLOAT, DT_DOUBLE}; }

// Comparison tolerance for a dtype's results against a double reference.
inline double Tolerance(DataType dtype) { return dtype == DT_FLOAT ? 2e-5 : 1e-11; }

// Any numeric tensor's values as doubles (tensor_values.h).
using ::oflite::ToDoubles;

// Expects |actual - expected| <= tol * max(1, |expected|) elementwise.
inline void ExpectAllNear(const HostTensor& actual, const std::vector<double>& expected, double tol,
                          const std::string& what = "") {
  std::vector<double> got = ToDoubles(actual);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], tol * std::max(1.0, std::fabs(expected[i])))
        << what << " element " << i;
  }
}

// Runs `op` on `env` and returns the outputs; fails the test on error.
inline TensorMap MustRun(const OpConf& op, TensorMap* env, const RunOpOptions& options = {}) {
  StatusOr<TensorMap> out = RunOp(op, env, options);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return std::move(out).value();
}

// The outputs of `op` run with cpu_threads = 1, 2 and 3 (the setting is put
// back afterwards), for the threaded kernels' same-bits tests.
inline std::vector<TensorMap> RunOnThreads(const OpConf& op, TensorMap* env) {
  const int before = CpuComputeThreadsSetting();
  std::vector<TensorMap> outs;
  for (int threads : {1, 2, 3}) {
    SetCpuComputeThreads(threads);
    outs.push_back(MustRun(op, env));
  }
  SetCpuComputeThreads(before > 0 ? before : 1);
  return outs;
}

// The message of a failed RunOp (empty and a test failure if it succeeded).
inline std::string RunError(const OpConf& op, TensorMap* env, const RunOpOptions& options = {}) {
  StatusOr<TensorMap> out = RunOp(op, env, options);
  EXPECT_FALSE(out.ok()) << "op '" << op.name() << "' unexpectedly succeeded";
  return out.ok() ? "" : out.status().message();
}

// Central finite differences of sum(cotangent * output) with respect to every
// element of the float64 input `input_lbn` (for checking a grad op on its own,
// e.g. with only some of the forward op's outputs receiving a gradient).
inline std::vector<double> NumericGradient(const OpConf& op, const TensorMap& env,
                                           const std::string& input_lbn,
                                           const std::string& output_lbn,
                                           const std::vector<double>& cotangent,
                                           double epsilon = 1e-6) {
  std::vector<double> grad(env.at(input_lbn).elem_count());
  auto loss = [&](int64_t element, double delta) {
    TensorMap copy;
    for (const auto& [lbn, t] : env) copy.emplace(lbn, t.Clone());
    copy.at(input_lbn).data<double>()[element] += delta;
    TensorMap out = MustRun(op, &copy);
    const std::vector<double> y = ToDoubles(out.at(output_lbn));
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) sum += cotangent.at(i) * y[i];
    return sum;
  };
  for (size_t i = 0; i < grad.size(); ++i) {
    grad[i] = (loss(i, epsilon) - loss(i, -epsilon)) / (2 * epsilon);
  }
  return grad;
}

}  // namespace testing
}  // namespace nn
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_TESTING_NN_KERNEL_CHECKS_H_
