#include "oneflow_lite/kernels/cpu/train/initial_values.h"

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/data/counter_rng.h"

namespace oflite {

double InitialValue(const InitializerConfig& config, uint64_t seed, uint64_t index) {
  switch (config.kind) {
    case InitializerConfig::Kind::kConstant:
      return config.value;
    case InitializerConfig::Kind::kUniform:
      return config.low + (config.high - config.low) * UniformFromBits(CounterBits(seed, index));
    case InitializerConfig::Kind::kNormal:
      return config.mean + config.std * NormalFromBits(CounterBits(seed, 2 * index),
                                                       CounterBits(seed, 2 * index + 1));
  }
  return 0.0;
}

StatusOr<HostTensor> InitialVariableValue(const OpConf& variable, int64_t job_seed) {
  if (variable.op_type() != "variable") {
    return InvalidArgumentError("op '", variable.name(), "' (", variable.op_type(),
                                ") is not a variable");
  }
  AttrView attrs(variable);
  ASSIGN_OR_RETURN(Shape shape, attrs.GetShape("shape"));
  ASSIGN_OR_RETURN(InitializerConfig config, InitializerFromAttrs(variable, shape));
  DataType dtype = DT_FLOAT;
  if (attrs.Has("dtype")) {
    ASSIGN_OR_RETURN(dtype, attrs.GetDataType("dtype"));
  }
  if (dtype != DT_FLOAT && dtype != DT_DOUBLE) {
    return InvalidArgumentError("variable '", variable.name(), "': dtype ",
                                TensorDesc(shape, dtype).ToString(),
                                " is neither float32 nor float64");
  }
  const uint64_t seed = EffectiveSeed(variable, job_seed);
  HostTensor value(TensorDesc(shape, dtype));
  const int64_t count = shape.elem_count();
  for (int64_t i = 0; i < count; ++i) {
    const double x = InitialValue(config, seed, static_cast<uint64_t>(i));
    if (dtype == DT_FLOAT) {
      value.data<float>()[i] = static_cast<float>(x);
    } else {
      value.data<double>()[i] = x;
    }
  }
  return value;
}

}  // namespace oflite
