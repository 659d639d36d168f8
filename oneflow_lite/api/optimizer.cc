#include "oneflow_lite/api/optimizer.h"

#include <set>
#include <vector>

#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/variable.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {

LrScheduleOptions LrScheduleOptions::Step(int64_t step_size, double gamma) {
  LrScheduleOptions s;
  s.type = LR_STEP;
  s.step_size = step_size;
  s.gamma = gamma;
  return s;
}

LrScheduleOptions LrScheduleOptions::Cosine(int64_t warmup_iters, double min_lr) {
  LrScheduleOptions s;
  s.type = LR_COSINE;
  s.warmup_iters = warmup_iters;
  s.min_lr = min_lr;
  return s;
}

namespace {

struct ConfFiller {
  OptimizerConf* conf;
  void operator()(const Sgd& o) const {
    conf->set_type(OPT_SGD);
    conf->mutable_lr()->set_base_lr(o.learning_rate);
    conf->set_weight_decay(o.weight_decay);
  }
  void operator()(const Momentum& o) const {
    conf->set_type(OPT_MOMENTUM);
    conf->mutable_lr()->set_base_lr(o.learning_rate);
    conf->set_momentum(o.momentum);
    conf->set_weight_decay(o.weight_decay);
  }
  void operator()(const Adam& o) const {
    conf->set_type(OPT_ADAM);
    conf->mutable_lr()->set_base_lr(o.learning_rate);
    conf->set_beta1(o.beta1);
    conf->set_beta2(o.beta2);
    conf->set_epsilon(o.epsilon);
    conf->set_weight_decay(o.weight_decay);
  }
  void operator()(const AdamW& o) const {
    conf->set_type(OPT_ADAMW);
    conf->mutable_lr()->set_base_lr(o.learning_rate);
    conf->set_beta1(o.beta1);
    conf->set_beta2(o.beta2);
    conf->set_epsilon(o.epsilon);
    conf->set_weight_decay(o.weight_decay);
  }
};

const char* UpdateOpType(OptimizerType type) {
  switch (type) {
    case OPT_SGD:
      return "sgd_update";
    case OPT_MOMENTUM:
      return "momentum_update";
    default:
      return "adam_update";
  }
}

const char* LrTypeName(LrScheduleType type) {
  switch (type) {
    case LR_STEP:
      return "step";
    case LR_COSINE:
      return "cosine";
    default:
      return "constant";
  }
}

// `weight_decay` is the conf's, or 0 for a variable below the conf's
// weight_decay_min_rank.
void SetLrAttrs(const OptimizerConf& conf, double weight_decay, OpConfBuilder* builder) {
  const LrSchedule& lr = conf.lr();
  builder->Attr("lr_type", LrTypeName(lr.type()))
      .Attr("base_lr", lr.base_lr())
      .Attr("step_size", lr.step_size())
      .Attr("gamma", lr.gamma())
      .Attr("warmup_iters", lr.warmup_iters())
      .Attr("total_iters", lr.total_iters())
      .Attr("min_lr", lr.min_lr())
      .Attr("weight_decay", weight_decay);
}

class OptimizerPass {
 public:
  OptimizerPass(const Job& job, const std::map<std::string, std::string>& grads)
      : job_(job), grads_(grads), descs_(BlobDescsOf(job)) {
    for (const OpConf& op : job.op()) used_names_.insert(op.name());
  }

  StatusOr<Job> Run();

 private:
  Status AddOp(OpConf op, const OpConf& variable);
  StatusOr<std::string> AddStateVariable(const OpConf& variable, const std::string& suffix);
  Status AddUpdate(const OpConf& variable, const std::string& grad_lbn,
                   const std::string& scale_lbn);

  Job job_;
  const std::map<std::string, std::string>& grads_;
  BlobDescMap descs_;
  std::set<std::string> used_names_;
};

Status OptimizerPass::AddOp(OpConf op, const OpConf& variable) {
  if (variable.has_placement()) *op.mutable_placement() = variable.placement();
  op.set_is_optimizer(true);
  ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(op.op_type(), op.name()));
  for (const std::string& arg : def->mutable_inputs) op.add_mutable_input(arg);
  RETURN_IF_ERROR(InferAndRecord(op, &descs_).WithContext("optimizer pass"));
  *job_.add_op() = std::move(op);
  return Status::OK();
}

StatusOr<std::string> OptimizerPass::AddStateVariable(const OpConf& variable,
                                                      const std::string& suffix) {
  const std::string name = MakeUniqueName(variable.name() + "-" + suffix, &used_names_);
  OpConf state = MakeVariableOp(name, descs_.at(OutputLbn(variable.name(), "out")),
                                Initializer::Zeros(), /*trainable=*/false, /*seed=*/0);
  *state.mutable_output_sbp_hint() = variable.output_sbp_hint();
  RETURN_IF_ERROR(AddOp(std::move(state), variable));
  return OutputLbn(name, "out");
}

Status OptimizerPass::AddUpdate(const OpConf& variable, const std::string& grad_lbn,
                                const std::string& scale_lbn) {
  const OptimizerConf& conf = job_.conf().train().optimizer();
  const std::string model_lbn = OutputLbn(variable.name(), "out");
  const std::string name = MakeUniqueName(variable.name() + "-update", &used_names_);
  OpConfBuilder builder(UpdateOpType(conf.type()), name);
  builder.Input("model", model_lbn).Input("model_diff", grad_lbn);
  if (conf.type() == OPT_MOMENTUM) {
    ASSIGN_OR_RETURN(std::string momentum, AddStateVariable(variable, "momentum"));
    builder.Input("momentum", momentum).Attr("beta", conf.momentum());
  } else if (conf.type() == OPT_ADAM || conf.type() == OPT_ADAMW) {
    ASSIGN_OR_RETURN(std::string m, AddStateVariable(variable, "m"));
    ASSIGN_OR_RETURN(std::string v, AddStateVariable(variable, "v"));
    builder.Input("m", m)
        .Input("v", v)
        .Attr("beta1", conf.beta1())
        .Attr("beta2", conf.beta2())
        .Attr("epsilon", conf.epsilon())
        .Attr("decoupled", conf.type() == OPT_ADAMW);
  }
  if (!scale_lbn.empty()) builder.Input("scale", scale_lbn);
  const int64_t rank = descs_.at(model_lbn).shape.rank();
  SetLrAttrs(conf, rank >= conf.weight_decay_min_rank() ? conf.weight_decay() : 0.0, &builder);
  OpConf update = builder.Build();
  for (const std::string& reader : ConsumersOf(job_, model_lbn)) {
    if (reader != name) update.add_control_input(reader);
  }
  return AddOp(std::move(update), variable);
}

StatusOr<Job> OptimizerPass::Run() {
  const OptimizerConf& conf = job_.conf().train().optimizer();
  RETURN_IF_ERROR(ValidateOptimizerConf(conf));
  std::vector<const OpConf*> variables;
  for (const auto& [name, grad] : grads_) {
    const OpConf* op = FindOp(job_, name);
    if (op == nullptr || !IsTrainableVariable(*op)) {
      return InvalidArgumentError("optimizer pass: '", name, "' is not a trainable variable");
    }
    if (!descs_.count(grad)) {
      return NotFoundError("optimizer pass: gradient '", grad, "' of variable '", name,
                           "' is not a blob of the job");
    }
  }
  std::string scale_lbn;
  if (conf.clip_global_norm() > 0 && !grads_.empty()) {
    std::vector<std::string> all_grads;
    for (const auto& [name, grad] : grads_) all_grads.push_back(grad);
    const std::string name = MakeUniqueName("optimizer-clip_scale", &used_names_);
    OpConf clip = OpConfBuilder("clip_scale", name)
                      .Input("in", all_grads)
                      .Output("out")
                      .Attr("max_norm", conf.clip_global_norm())
                      .Build();
    RETURN_IF_ERROR(AddOp(std::move(clip), OpConf()));
    scale_lbn = OutputLbn(name, "out");
  }
  for (const auto& [name, grad] : grads_) {
    const OpConf variable = *FindOp(job_, name);  // a copy: AddOp appends to job_
    RETURN_IF_ERROR(AddUpdate(variable, grad, scale_lbn));
  }
  SetBlobDescs(descs_, &job_);
  return job_;
}

}  // namespace

OptimizerConf MakeOptimizerConf(const Optimizer& optimizer, const MinimizeOptions& options) {
  OptimizerConf conf;
  std::visit(ConfFiller{&conf}, optimizer);
  LrSchedule* lr = conf.mutable_lr();
  lr->set_type(options.schedule.type);
  lr->set_step_size(options.schedule.step_size);
  lr->set_gamma(options.schedule.gamma);
  lr->set_warmup_iters(options.schedule.warmup_iters);
  lr->set_min_lr(options.schedule.min_lr);
  conf.set_clip_global_norm(options.clip_global_norm);
  conf.set_weight_decay_min_rank(options.weight_decay_min_rank);
  return conf;
}

Status ValidateOptimizerConf(const OptimizerConf& conf) {
  auto bad = [](const auto&... args) { return InvalidArgumentError("optimizer: ", args...); };
  const LrSchedule& lr = conf.lr();
  if (!(lr.base_lr() > 0)) return bad("learning_rate must be > 0, got ", lr.base_lr());
  if (conf.weight_decay() < 0) return bad("weight_decay must be >= 0, got ", conf.weight_decay());
  if (conf.clip_global_norm() < 0) {
    return bad("clip_global_norm must be >= 0, got ", conf.clip_global_norm());
  }
  if (conf.weight_decay_min_rank() < 0) {
    return bad("weight_decay_min_rank must be >= 0, got ", conf.weight_decay_min_rank());
  }
  if (conf.type() == OPT_MOMENTUM && !(conf.momentum() >= 0 && conf.momentum() < 1)) {
    return bad("momentum must be in [0, 1), got ", conf.momentum());
  }
  if (conf.type() == OPT_ADAM || conf.type() == OPT_ADAMW) {
    if (!(conf.beta1() >= 0 && conf.beta1() < 1))
      return bad("beta1 must be in [0, 1), got ", conf.beta1());
    if (!(conf.beta2() >= 0 && conf.beta2() < 1))
      return bad("beta2 must be in [0, 1), got ", conf.beta2());
    if (!(conf.epsilon() > 0)) return bad("epsilon must be > 0, got ", conf.epsilon());
  }
  if (lr.type() == LR_STEP && (lr.step_size() <= 0 || !(lr.gamma() > 0))) {
    return bad("step schedule needs step_size > 0 and gamma > 0, got ", lr.step_size(), " and ",
               lr.gamma());
  }
  if (lr.type() == LR_COSINE) {
    if (lr.warmup_iters() < 0) return bad("warmup_iters must be >= 0");
    if (lr.min_lr() < 0 || lr.min_lr() > lr.base_lr()) {
      return bad("min_lr must be in [0, learning_rate], got ", lr.min_lr());
    }
    if (lr.total_iters() <= lr.warmup_iters()) {
      return bad("cosine schedule needs total iterations (", lr.total_iters(), ") > warmup_iters (",
                 lr.warmup_iters(), ")");
    }
  }
  return Status::OK();
}

StatusOr<Job> AddOptimizerOps(const Job& job,
                              const std::map<std::string, std::string>& variable_grads) {
  return OptimizerPass(job, variable_grads).Run();
}

}  // namespace oflite
