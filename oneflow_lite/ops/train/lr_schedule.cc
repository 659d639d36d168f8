#include "oneflow_lite/ops/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace oflite {
namespace {

StatusOr<LrType> ParseLrType(const std::string& name, const std::string& where) {
  if (name == "constant") return LrType::kConstant;
  if (name == "step") return LrType::kStep;
  if (name == "cosine") return LrType::kCosine;
  return InvalidArgumentError(where, "unknown lr_type '", name,
                              "' (expected constant, step or cosine)");
}

}  // namespace

const char* LrTypeName(LrType type) {
  switch (type) {
    case LrType::kConstant:
      return "constant";
    case LrType::kStep:
      return "step";
    case LrType::kCosine:
      return "cosine";
  }
  return "?";
}

Status ValidateLrSchedule(const LrScheduleConfig& config, const std::string& where) {
  if (!(config.base_lr >= 0.0) || !std::isfinite(config.base_lr)) {
    return InvalidArgumentError(where, "base_lr must be finite and >= 0, got ", config.base_lr);
  }
  if (config.warmup_iters < 0) {
    return InvalidArgumentError(where, "warmup_iters must be >= 0, got ", config.warmup_iters);
  }
  if (config.type == LrType::kStep) {
    if (config.step_size <= 0) {
      return InvalidArgumentError(where, "lr_type 'step' needs step_size > 0, got ",
                                  config.step_size);
    }
    if (!std::isfinite(config.gamma) || config.gamma < 0.0) {
      return InvalidArgumentError(where, "gamma must be finite and >= 0, got ", config.gamma);
    }
  }
  if (config.type == LrType::kCosine) {
    if (config.total_iters <= config.warmup_iters) {
      return InvalidArgumentError(where, "lr_type 'cosine' needs total_iters (", config.total_iters,
                                  ") > warmup_iters (", config.warmup_iters, ")");
    }
    if (!std::isfinite(config.min_lr) || config.min_lr < 0.0) {
      return InvalidArgumentError(where, "min_lr must be finite and >= 0, got ", config.min_lr);
    }
  }
  return Status::OK();
}

StatusOr<LrScheduleConfig> LrScheduleFromAttrs(const OpConf& op) {
  const std::string where = "op '" + op.name() + "' (" + op.op_type() + "): ";
  AttrView attrs(op);
  LrScheduleConfig config;
  ASSIGN_OR_RETURN(config.type, ParseLrType(attrs.GetStringOr("lr_type", "constant"), where));
  StatusOr<double> base_lr = attrs.GetFloat("base_lr");
  if (!base_lr.ok()) return base_lr.status();
  config.base_lr = *base_lr;
  config.warmup_iters = attrs.GetIntOr("warmup_iters", 0);
  config.step_size = attrs.GetIntOr("step_size", 0);
  config.gamma = attrs.GetFloatOr("gamma", 0.1);
  config.total_iters = attrs.GetIntOr("total_iters", 0);
  config.min_lr = attrs.GetFloatOr("min_lr", 0.0);
  RETURN_IF_ERROR(ValidateLrSchedule(config, where));
  return config;
}

double LearningRateAt(const LrScheduleConfig& config, int64_t iteration) {
  const int64_t t = std::max<int64_t>(iteration, 0);
  if (t < config.warmup_iters) {
    return config.base_lr * static_cast<double>(t + 1) / static_cast<double>(config.warmup_iters);
  }
  switch (config.type) {
    case LrType::kConstant:
      return config.base_lr;
    case LrType::kStep:
      return config.base_lr * std::pow(config.gamma, static_cast<double>(t / config.step_size));
    case LrType::kCosine: {
      constexpr double kPi = 3.14159265358979323846;
      const double span = static_cast<double>(config.total_iters - config.warmup_iters);
      const double progress = std::min(1.0, static_cast<double>(t - config.warmup_iters) / span);
      return config.min_lr +
             (config.base_lr - config.min_lr) * 0.5 * (1.0 + std::cos(kPi * progress));
    }
  }
  return config.base_lr;
}

LrScheduleConfig LrScheduleFromProto(const LrSchedule& proto) {
  LrScheduleConfig config;
  switch (proto.type()) {
    case LR_STEP:
      config.type = LrType::kStep;
      break;
    case LR_COSINE:
      config.type = LrType::kCosine;
      break;
    default:
      config.type = LrType::kConstant;
  }
  config.base_lr = proto.base_lr();
  config.warmup_iters = proto.warmup_iters();
  config.step_size = proto.step_size();
  config.gamma = proto.gamma();
  config.total_iters = proto.total_iters();
  config.min_lr = proto.min_lr();
  return config;
}

void SetLrScheduleAttrs(const LrScheduleConfig& config, OpConf* op) {
  SetStringAttr(op, "lr_type", LrTypeName(config.type));
  SetFloatAttr(op, "base_lr", config.base_lr);
  SetIntAttr(op, "warmup_iters", config.warmup_iters);
  SetIntAttr(op, "step_size", config.step_size);
  SetFloatAttr(op, "gamma", config.gamma);
  SetIntAttr(op, "total_iters", config.total_iters);
  SetFloatAttr(op, "min_lr", config.min_lr);
}

}  // namespace oflite
