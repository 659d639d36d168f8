// Test-only SBP signature checker (a testonly target: production code cannot
// depend on it): verifies that every signature an op's SbpFn offers is
// mathematically consistent with its CPU kernel.
//
// For each signature and device p of `parallel_num`, it builds the physical
// inputs from the logical ones (S(a): the balanced slice along a, the rule of
// common/partition.h; B: a full copy; P: random parts that sum to the
// logical tensor), runs the kernel on
// those physical blobs exactly as the runtime would (physical output shapes
// are the split of the logical ones), then combines the outputs (S: concat,
// B: every device must hold the full result, P: sum) and compares them with
// the single-device result. Inputs must be float64 (integer inputs are only
// split or broadcast). float32 outputs are compared with a tolerance of at
// least 1e-5. Single-threaded; for tests.
#ifndef ONEFLOW_LITE_TESTING_SBP_CHECKER_H_
#define ONEFLOW_LITE_TESTING_SBP_CHECKER_H_

#include <string>
#include <vector>

#include "oneflow_lite/ops/sbp.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {

struct SbpCheckResult {
  std::vector<SbpSignature> signatures;  // what the op offered
};

// Returns the offered signatures, or an error naming the op, the signature,
// the device and the mismatching element.
StatusOr<SbpCheckResult> CheckSbpSignatures(const OpConf& op, const TensorMap& env,
                                            int64_t parallel_num, double tolerance = 1e-9,
                                            uint64_t seed = 11);

// Checks one signature (which need not be offered by the op).
Status CheckSbpSignature(const OpConf& op, const TensorMap& env, const SbpSignature& sig,
                         int64_t parallel_num, double tolerance = 1e-9, uint64_t seed = 11);

}  // namespace oflite

#endif  // ONEFLOW_LITE_TESTING_SBP_CHECKER_H_
