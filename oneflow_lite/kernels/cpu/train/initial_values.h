// The values of a variable's initializer, element by element: the one home
// of the rule the `variable` kernel fills its output with, also used to
// hand a model's initial weights to another framework (the GPT example's
// --init-out writes them as .npy for its PyTorch twin).
//
// Element i (row-major index in the logical tensor) is a pure function of
// (initializer, seed, i) through data/counter_rng.h, bit-identical on every
// machine. Thread-safe.
#ifndef ONEFLOW_LITE_KERNELS_CPU_TRAIN_INITIAL_VALUES_H_
#define ONEFLOW_LITE_KERNELS_CPU_TRAIN_INITIAL_VALUES_H_

#include <cstdint>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/ops/train/initializer.h"
#include "proto/job.pb.h"

namespace oflite {

// Element `index` of a variable initialized by `config` from `seed`.
double InitialValue(const InitializerConfig& config, uint64_t seed, uint64_t index);

// The whole logical value of `variable` (a `variable` op of a job with seed
// `job_seed`), float32 or float64 as its dtype attr says.
StatusOr<HostTensor> InitialVariableValue(const OpConf& variable, int64_t job_seed);

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_TRAIN_INITIAL_VALUES_H_
