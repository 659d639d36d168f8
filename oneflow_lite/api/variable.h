// Variables: initializer descriptions and the `variable` OpConf they become.
//
// An Initializer is a plain value naming one of the initializers of the
// `variable` op (docs/ops.md, train family) and its parameters. Fan-in and
// fan-out for the xavier/kaiming initializers are computed by the variable
// kernel from the variable's shape (ops/train/initializer.h: [in, out] for
// rank 2, [O, C, K...] for convolutions). MakeVariableOp writes every initializer
// attribute explicitly, so the Job does not depend on kernel defaults.
#ifndef ONEFLOW_LITE_API_VARIABLE_H_
#define ONEFLOW_LITE_API_VARIABLE_H_

#include <cstdint>
#include <string>

#include "oneflow_lite/common/tensor.h"
#include "proto/job.pb.h"

namespace oflite {

struct Initializer {
  std::string kind = "constant";  // constant, uniform, normal, xavier_*, kaiming_*
  double value = 0;               // constant
  double low = 0, high = 0;       // uniform
  double mean = 0, std = 0;       // normal
  double gain = 1;                // xavier_*, kaiming_*

  static Initializer Constant(double value);
  static Initializer Zeros() { return Constant(0); }
  static Initializer Ones() { return Constant(1); }
  static Initializer Uniform(double low, double high);
  static Initializer Normal(double mean, double std);
  static Initializer XavierUniform(double gain = 1);
  static Initializer XavierNormal(double gain = 1);
  // Kaiming gains default to sqrt(2) (ReLU), as in the variable op.
  static Initializer KaimingUniform(double gain = 1.4142135623730951);
  static Initializer KaimingNormal(double gain = 1.4142135623730951);
  // Chosen from the variable's shape when it is created (ResolveInitializer).
  static Initializer Auto();
};

// `init`, or for Initializer::Auto(): XavierUniform() when `shape` has rank
// >= 2 (a weight), Zeros() otherwise (a bias, a scalar).
Initializer ResolveInitializer(const Initializer& init, const Shape& shape);

// A `variable` op named `name` whose output "<name>/out_0" has `desc`
// (Initializer::Auto resolved by the shape first).
OpConf MakeVariableOp(const std::string& name, const TensorDesc& desc,
                      const Initializer& initializer, bool trainable, int64_t seed);

// Whether `op` is a variable the optimizer updates (`trainable` defaults
// to true when the attribute is absent).
bool IsTrainableVariable(const OpConf& op);

// A seed derived from the job seed and a per-graph counter (splitmix64),
// so every variable / dropout / shuffle gets its own reproducible stream.
int64_t DeriveSeed(int64_t job_seed, int64_t counter);

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_VARIABLE_H_
