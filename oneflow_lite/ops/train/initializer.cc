#include "oneflow_lite/ops/train/initializer.h"

#include <cmath>

#include "oneflow_lite/common/attr.h"

namespace oflite {
namespace {

uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001B3ULL;
  }
  return hash;
}

Status CheckFinite(const std::string& where, const char* key, double v) {
  if (!std::isfinite(v)) return InvalidArgumentError(where, key, " must be finite, got ", v);
  return Status::OK();
}

// Fills the Glorot/He ranges once the fans are known.
Status SetFanBased(const std::string& where, const AttrView& attrs, InitializerConfig* c) {
  const bool xavier = c->name.rfind("xavier", 0) == 0;
  const double gain = attrs.GetFloatOr("gain", xavier ? 1.0 : std::sqrt(2.0));
  RETURN_IF_ERROR(CheckFinite(where, "gain", gain));
  if (gain < 0) return InvalidArgumentError(where, "gain must be >= 0, got ", gain);
  if (c->fan_in <= 0 || c->fan_out <= 0) {
    return InvalidArgumentError(where, "initializer '", c->name,
                                "' needs positive fans, got fan_in=", c->fan_in,
                                " fan_out=", c->fan_out);
  }
  const double fan_sum = static_cast<double>(c->fan_in + c->fan_out);
  const double fan_in = static_cast<double>(c->fan_in);
  if (c->name == "xavier_uniform") {
    c->kind = InitializerConfig::Kind::kUniform;
    c->high = gain * std::sqrt(6.0 / fan_sum);
    c->low = -c->high;
  } else if (c->name == "xavier_normal") {
    c->kind = InitializerConfig::Kind::kNormal;
    c->mean = 0.0;
    c->std = gain * std::sqrt(2.0 / fan_sum);
  } else if (c->name == "kaiming_uniform") {
    c->kind = InitializerConfig::Kind::kUniform;
    c->high = gain * std::sqrt(3.0 / fan_in);
    c->low = -c->high;
  } else {  // kaiming_normal
    c->kind = InitializerConfig::Kind::kNormal;
    c->mean = 0.0;
    c->std = gain / std::sqrt(fan_in);
  }
  return Status::OK();
}

}  // namespace

Fans ComputeFans(const Shape& shape) {
  Fans fans;
  if (shape.rank() == 1) {
    fans.fan_in = fans.fan_out = shape.dim(0);
  } else if (shape.rank() == 2) {
    fans.fan_in = shape.dim(0);
    fans.fan_out = shape.dim(1);
  } else if (shape.rank() >= 3) {
    const int64_t receptive = shape.Count(2);
    fans.fan_in = shape.dim(1) * receptive;
    fans.fan_out = shape.dim(0) * receptive;
  }
  return fans;
}

StatusOr<InitializerConfig> InitializerFromAttrs(const OpConf& op, const Shape& shape) {
  const std::string where = "op '" + op.name() + "' (" + op.op_type() + "): ";
  AttrView attrs(op);
  InitializerConfig c;
  c.name = attrs.GetStringOr("initializer", "constant");
  const Fans fans = ComputeFans(shape);
  c.fan_in = attrs.GetIntOr("fan_in", fans.fan_in);
  c.fan_out = attrs.GetIntOr("fan_out", fans.fan_out);
  if (c.name == "constant") {
    c.kind = InitializerConfig::Kind::kConstant;
    c.value = attrs.GetFloatOr("value", 0.0);
    RETURN_IF_ERROR(CheckFinite(where, "value", c.value));
  } else if (c.name == "uniform") {
    c.kind = InitializerConfig::Kind::kUniform;
    c.low = attrs.GetFloatOr("low", 0.0);
    c.high = attrs.GetFloatOr("high", 1.0);
    RETURN_IF_ERROR(CheckFinite(where, "low", c.low));
    RETURN_IF_ERROR(CheckFinite(where, "high", c.high));
    if (c.low > c.high) {
      return InvalidArgumentError(where, "uniform initializer needs low <= high, got [", c.low,
                                  ", ", c.high, ")");
    }
  } else if (c.name == "normal") {
    c.kind = InitializerConfig::Kind::kNormal;
    c.mean = attrs.GetFloatOr("mean", 0.0);
    c.std = attrs.GetFloatOr("std", 1.0);
    RETURN_IF_ERROR(CheckFinite(where, "mean", c.mean));
    RETURN_IF_ERROR(CheckFinite(where, "std", c.std));
    if (c.std < 0)
      return InvalidArgumentError(where, "normal initializer needs std >= 0, got ", c.std);
  } else if (c.name == "xavier_uniform" || c.name == "xavier_normal" ||
             c.name == "kaiming_uniform" || c.name == "kaiming_normal") {
    RETURN_IF_ERROR(SetFanBased(where, attrs, &c));
  } else {
    return InvalidArgumentError(where, "unknown initializer '", c.name,
                                "' (expected constant, uniform, normal, xavier_uniform, "
                                "xavier_normal, kaiming_uniform or kaiming_normal)");
  }
  return c;
}

uint64_t EffectiveSeed(const OpConf& op, int64_t job_seed) {
  AttrView attrs(op);
  if (attrs.Has("seed")) return static_cast<uint64_t>(attrs.GetIntOr("seed", 0));
  return Fnv1a(op.name()) ^ (static_cast<uint64_t>(job_seed) * 0x9E3779B97F4A7C15ULL);
}

}  // namespace oflite
