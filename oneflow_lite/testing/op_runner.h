// Test helpers: run one op eagerly on the CPU and check its gradient rule
// against finite differences.
//
// RunOp infers output shapes with the op registry, creates the CPU kernel for
// `dtype` (default: the dtype of the first input), binds host tensors and runs
// one Forward. Inputs named in OpDef::mutable_inputs are updated in place.
// Inputs are keyed by lbn as they appear in the OpConf; outputs are returned
// keyed by their lbn. Single-threaded; for tests and small tools only.
#ifndef ONEFLOW_LITE_TESTING_OP_RUNNER_H_
#define ONEFLOW_LITE_TESTING_OP_RUNNER_H_

#include <map>
#include <string>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

using TensorMap = std::map<std::string, HostTensor>;  // lbn -> tensor

struct RunOpOptions {
  DataType dtype = DT_INVALID;  // kernel dtype; DT_INVALID = first input's
  int64_t iteration = 0;
  int64_t seed = 0;
  int64_t parallel_id = 0;
  int64_t parallel_num = 1;
};

// Runs `op`, reading its inputs from `env` (by lbn), and returns its outputs
// by lbn. Mutable inputs in `env` are modified in place.
StatusOr<TensorMap> RunOp(const OpConf& op, TensorMap* env, const RunOpOptions& options = {});

// Fills a tensor with uniform values in [lo, hi) (float or double) or
// integers in [lo, hi) (int32/int64), from `seed`.
HostTensor RandomTensor(const TensorDesc& desc, uint64_t seed, double lo = -1.0, double hi = 1.0);

struct GradCheckOptions {
  double epsilon = 1e-6;      // finite-difference step
  double rtol = 1e-5;         // per element: |a - n| <= atol + rtol * |n|
  double atol = 1e-6;
  int max_elements_per_input = 64;  // elements probed per input (sampled)
  uint64_t seed = 7;
  // Inputs (arg names) not to check, e.g. integer labels.
  std::vector<std::string> skip_inputs;
};

// Checks the op's registered gradient rule. `env` holds the op's inputs in
// float64 (integer inputs such as labels keep their dtype and are skipped).
// The scalar loss is sum(c * out) over every float64 output with a fixed
// random cotangent c. The backward ops the rule adds run eagerly in float64.
// Returns an error naming the input, the element and both values on mismatch.
Status CheckOpGradient(const OpConf& op, const TensorMap& env,
                       const GradCheckOptions& options = {});

}  // namespace oflite

#endif  // ONEFLOW_LITE_TESTING_OP_RUNNER_H_
