#include "oneflow_lite/ops/op_def.h"

#include <algorithm>
#include <set>

namespace oflite {
namespace {

std::map<std::string, OpDef>& Registry() {
  static auto* registry = new std::map<std::string, OpDef>();
  return *registry;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Edit distance, for "did you mean" suggestions.
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

int InferContext::InputCount(const std::string& arg) const {
  auto it = inputs_.find(arg);
  return it == inputs_.end() ? 0 : static_cast<int>(it->second.size());
}

const TensorDesc& InferContext::Input(const std::string& arg, int index) const {
  auto it = inputs_.find(arg);
  CHECK(it != inputs_.end() && index < static_cast<int>(it->second.size()))
      << "op '" << op_.name() << "': no input " << arg << "[" << index << "]";
  return it->second[index];
}

TensorDesc* InferContext::Output(const std::string& arg, int index) {
  auto& v = outputs_[arg];
  if (static_cast<int>(v.size()) <= index) v.resize(index + 1);
  return &v[index];
}

StatusOr<const OpDef*> LookupOpDef(const std::string& op_type, const std::string& op_name) {
  auto it = Registry().find(op_type);
  if (it != Registry().end()) return &it->second;
  std::string suggestion;
  size_t best = 3;
  for (const auto& [type, def] : Registry()) {
    size_t d = Distance(type, op_type);
    if (d < best) {
      best = d;
      suggestion = type;
    }
  }
  std::string where = op_name.empty() ? "" : "op '" + op_name + "': ";
  return NotFoundError(where, "unknown op type '", op_type, "'",
                       suggestion.empty() ? "" : " (did you mean '" + suggestion + "'?)");
}

std::vector<std::string> RegisteredOpTypes() {
  std::vector<std::string> types;
  for (const auto& [type, def] : Registry()) types.push_back(type);
  return types;
}

StatusOr<ArgDescs> InferOp(const OpConf& op, const ArgDescs& inputs) {
  ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(op.op_type(), op.name()));
  auto err = [&](const auto&... args) {
    return InvalidArgumentError("op '", op.name(), "' (", op.op_type(), "): ", args...);
  };
  std::set<std::string> given;
  for (const ArgProto& arg : op.input()) {
    if (!Contains(def->inputs, arg.name())) return err("unknown input argument '", arg.name(), "'");
    if (!given.insert(arg.name()).second) return err("input '", arg.name(), "' given twice");
    if (arg.lbn_size() == 0) return err("input '", arg.name(), "' has no blob");
    if (arg.lbn_size() > 1 && !Contains(def->variadic_inputs, arg.name())) {
      return err("input '", arg.name(), "' takes one blob, got ", arg.lbn_size());
    }
  }
  for (const std::string& name : def->inputs) {
    if (!given.count(name) && !Contains(def->optional_inputs, name)) {
      return err("missing input '", name, "'");
    }
    auto it = inputs.find(name);
    int expected = 0;
    for (const ArgProto& arg : op.input()) {
      if (arg.name() == name) expected = arg.lbn_size();
    }
    int got = it == inputs.end() ? 0 : static_cast<int>(it->second.size());
    if (got != expected) {
      return err("input '", name, "' has ", expected, " blobs but ", got, " descs were given");
    }
  }
  InferContext ctx(op, inputs);
  if (def->infer) RETURN_IF_ERROR(def->infer(&ctx));
  for (const std::string& name : def->outputs) {
    auto it = ctx.outputs().find(name);
    if (it == ctx.outputs().end() || it->second.empty()) {
      return InternalError("op '", op.name(), "' (", op.op_type(), "): inference set no output '",
                           name, "'");
    }
    for (const TensorDesc& d : it->second) {
      if (d.dtype == DT_INVALID) {
        return InternalError("op '", op.name(), "': inference left output '", name,
                             "' without dtype");
      }
    }
  }
  return ctx.outputs();
}

OpDefBuilder::OpDefBuilder(const std::string& type) { def_.type = type; }
OpDefBuilder& OpDefBuilder::Input(const std::string& name) {
  def_.inputs.push_back(name);
  return *this;
}
OpDefBuilder& OpDefBuilder::VariadicInput(const std::string& name) {
  def_.inputs.push_back(name);
  def_.variadic_inputs.push_back(name);
  return *this;
}
OpDefBuilder& OpDefBuilder::OptionalInput(const std::string& name) {
  def_.inputs.push_back(name);
  def_.optional_inputs.push_back(name);
  return *this;
}
OpDefBuilder& OpDefBuilder::Output(const std::string& name) {
  def_.outputs.push_back(name);
  return *this;
}
OpDefBuilder& OpDefBuilder::MutableInput(const std::string& name) {
  def_.inputs.push_back(name);
  def_.mutable_inputs.push_back(name);
  return *this;
}
Status SplitOutputAlongLongAxes(SbpContext* ctx) {
  const Shape& shape = ctx->outputs().at(0).shape;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (shape.dim(axis) >= ctx->parallel_num()) ctx->Add(SbpSignature{{}, {SplitSbp(axis)}});
  }
  return Status::OK();
}

OpDefBuilder& OpDefBuilder::Source() {
  def_.is_source = true;
  return *this;
}
OpDefBuilder& OpDefBuilder::NoGrad() {
  def_.no_grad = true;
  return *this;
}
OpDefBuilder& OpDefBuilder::Infer(InferFn fn) {
  def_.infer = std::move(fn);
  return *this;
}
OpDefBuilder& OpDefBuilder::Sbp(SbpFn fn) {
  def_.sbp = std::move(fn);
  return *this;
}
OpDefBuilder& OpDefBuilder::Grad(GradFn fn) {
  def_.grad = std::move(fn);
  return *this;
}

OpRegistrar::OpRegistrar(const OpDefBuilder& builder) {
  const OpDef& def = builder.def();
  CHECK(!def.type.empty()) << "REGISTER_OP with an empty type";
  CHECK(Registry().emplace(def.type, def).second) << "op type '" << def.type
                                                  << "' registered twice";
}

}  // namespace oflite
