// Variable initializers: the attributes of a `variable` op, parsed and
// validated, and the fan convention the Glorot/He initializers use.
//
// Attributes (docs/ops.md, "variable"):
//   initializer  "constant" (default) | "uniform" | "normal" | "xavier_uniform"
//                | "xavier_normal" | "kaiming_uniform" | "kaiming_normal"
//   value        constant: the value (default 0)
//   low, high    uniform: the range (default [0, 1))
//   mean, std    normal: the distribution (default 0, 1); std >= 0
//   gain         xavier_*: default 1; kaiming_*: default sqrt(2) (ReLU)
//   fan_in, fan_out  optional ints overriding the fans derived from the shape
//   seed         optional int; absent -> derived from the job seed and the op
//                name (see EffectiveSeed)
// Fan convention (Glorot/He), from the logical shape:
//   rank 0: fan_in = fan_out = 1;  rank 1 [n]: fan_in = fan_out = n
//   rank 2 [in, out] (our Dense/matmul weight layout): fan_in = in, fan_out = out
//   rank >= 3 [O, C, K...] (conv weight): receptive = prod(K...),
//     fan_in = C * receptive, fan_out = O * receptive
// Distributions:
//   xavier_uniform  U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out))
//   xavier_normal   N(0, s),  s = gain * sqrt(2 / (fan_in + fan_out))
//   kaiming_uniform U(-b, b), b = gain * sqrt(3 / fan_in)
//   kaiming_normal  N(0, s),  s = gain / sqrt(fan_in)
// Pure functions, thread-safe.
#ifndef ONEFLOW_LITE_OPS_TRAIN_INITIALIZER_H_
#define ONEFLOW_LITE_OPS_TRAIN_INITIALIZER_H_

#include <cstdint>
#include <string>

#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

// What every initializer reduces to: a constant, a uniform range, or a
// normal distribution.
struct InitializerConfig {
  enum class Kind { kConstant, kUniform, kNormal };
  std::string name;  // the attribute value, e.g. "kaiming_normal"
  Kind kind = Kind::kConstant;
  double value = 0.0;  // kConstant
  double low = 0.0;    // kUniform: [low, high)
  double high = 1.0;
  double mean = 0.0;  // kNormal
  double std = 1.0;
  int64_t fan_in = 1;
  int64_t fan_out = 1;
};

struct Fans {
  int64_t fan_in = 1;
  int64_t fan_out = 1;
};

// The fan convention above.
Fans ComputeFans(const Shape& shape);

// Parses the initializer attributes for a variable of logical `shape`.
// InvalidArgument naming the op on an unknown initializer or a bad
// parameter (low > high, negative std, zero fan).
StatusOr<InitializerConfig> InitializerFromAttrs(const OpConf& op, const Shape& shape);

// The seed the variable's values come from: attr "seed" if set, otherwise a
// stable mix of the job seed and the op name (so two variables of one job
// never share a stream, and every machine agrees).
uint64_t EffectiveSeed(const OpConf& op, int64_t job_seed);

}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_TRAIN_INITIALIZER_H_
