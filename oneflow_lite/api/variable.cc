#include "oneflow_lite/api/variable.h"

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {

Initializer Initializer::Constant(double value) {
  Initializer init;
  init.kind = "constant";
  init.value = value;
  return init;
}

Initializer Initializer::Uniform(double low, double high) {
  Initializer init;
  init.kind = "uniform";
  init.low = low;
  init.high = high;
  return init;
}

Initializer Initializer::Normal(double mean, double std) {
  Initializer init;
  init.kind = "normal";
  init.mean = mean;
  init.std = std;
  return init;
}

namespace {
Initializer WithGain(const char* kind, double gain) {
  Initializer init;
  init.kind = kind;
  init.gain = gain;
  return init;
}
}  // namespace

Initializer Initializer::XavierUniform(double gain) { return WithGain("xavier_uniform", gain); }
Initializer Initializer::XavierNormal(double gain) { return WithGain("xavier_normal", gain); }
Initializer Initializer::KaimingUniform(double gain) { return WithGain("kaiming_uniform", gain); }
Initializer Initializer::KaimingNormal(double gain) { return WithGain("kaiming_normal", gain); }

Initializer Initializer::Auto() {
  Initializer init;
  init.kind = "auto";
  return init;
}

Initializer ResolveInitializer(const Initializer& init, const Shape& shape) {
  if (init.kind != "auto") return init;
  return shape.rank() >= 2 ? Initializer::XavierUniform() : Initializer::Zeros();
}

OpConf MakeVariableOp(const std::string& name, const TensorDesc& desc,
                      const Initializer& requested, bool trainable, int64_t seed) {
  const Initializer initializer = ResolveInitializer(requested, desc.shape);
  return OpConfBuilder("variable", name)
      .Output("out")
      .Attr("shape", desc.shape)
      .Attr("dtype", desc.dtype)
      .Attr("initializer", initializer.kind)
      .Attr("value", initializer.value)
      .Attr("low", initializer.low)
      .Attr("high", initializer.high)
      .Attr("mean", initializer.mean)
      .Attr("std", initializer.std)
      .Attr("gain", initializer.gain)
      .Attr("seed", seed)
      .Attr("trainable", trainable)
      .Build();
}

bool IsTrainableVariable(const OpConf& op) {
  return op.op_type() == "variable" && AttrView(op).GetBoolOr("trainable", true);
}

int64_t DeriveSeed(int64_t job_seed, int64_t counter) {
  uint64_t z =
      static_cast<uint64_t>(job_seed) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(counter) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<int64_t>(z >> 1);  // non-negative
}

}  // namespace oflite
