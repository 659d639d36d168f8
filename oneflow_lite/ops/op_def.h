// The op registry: what every op type is, independent of devices.
//
// An OpDef says, for one op type ("matmul", "relu", ...):
//   - its argument names (inputs, outputs) and which inputs it writes in place;
//   - shape/dtype inference (InferFn): output TensorDescs from input ones;
//   - SBP signatures (SbpFn): the layouts of inputs/outputs it accepts when
//     its placement has several devices, for the compiler's cost model;
//   - its gradient rule (GradFn): which backward ops autodiff adds to the Job.
// Kernels (oneflow_lite/kernels) are registered separately, by
// (op type, device, dtype).
//
// Registration is one line next to the op's definition:
//   REGISTER_OP("relu").Input("x").Output("y").Infer(...).Sbp(...).Grad(...);
// The registry is filled by static initializers before main() and is
// read-only afterwards, so lookups are thread-safe. Libraries that register
// ops must be linked with alwayslink = 1.
//
// Attribute conventions, per op, are documented in docs/ops.md.
#ifndef ONEFLOW_LITE_OPS_OP_DEF_H_
#define ONEFLOW_LITE_OPS_OP_DEF_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/ops/sbp.h"
#include "proto/job.pb.h"

namespace oflite {

// One named argument's descs (several for variadic args such as concat's).
using ArgDescs = std::map<std::string, std::vector<TensorDesc>>;

// Passed to InferFn. Inputs are known; the function fills every output.
class InferContext {
 public:
  InferContext(const OpConf& op, const ArgDescs& inputs) : op_(op), attrs_(op), inputs_(inputs) {}

  const OpConf& op() const { return op_; }
  const AttrView& attrs() const { return attrs_; }
  int InputCount(const std::string& arg) const;
  // CHECK-fails on a missing arg: the registry validated arg names already.
  const TensorDesc& Input(const std::string& arg, int index = 0) const;
  // Creates the output desc if needed.
  TensorDesc* Output(const std::string& arg, int index = 0);
  const ArgDescs& outputs() const { return outputs_; }

  // An InvalidArgument error prefixed with "op '<name>' (<type>): ".
  template <typename... Args>
  Status Error(const Args&... args) const {
    return InvalidArgumentError("op '", op_.name(), "' (", op_.op_type(), "): ", args...);
  }

 private:
  const OpConf& op_;
  AttrView attrs_;
  const ArgDescs& inputs_;
  ArgDescs outputs_;
};

// Passed to SbpFn: logical input/output descs and the number of devices.
// The function adds every signature the op supports (the all-broadcast
// signature is always allowed and need not be added).
class SbpContext {
 public:
  SbpContext(const OpConf& op, const std::vector<TensorDesc>& inputs,
             const std::vector<TensorDesc>& outputs, int64_t parallel_num)
      : op_(op), attrs_(op), inputs_(inputs), outputs_(outputs), parallel_num_(parallel_num) {}

  const OpConf& op() const { return op_; }
  const AttrView& attrs() const { return attrs_; }
  // Flattened in OpConf order.
  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const std::vector<TensorDesc>& outputs() const { return outputs_; }
  int64_t parallel_num() const { return parallel_num_; }

  void Add(SbpSignature sig) { signatures_.push_back(std::move(sig)); }
  const std::vector<SbpSignature>& signatures() const { return signatures_; }
  // Says why a signature the user may expect was not offered (e.g. "batch 64
  // is not divisible by 3 devices"); the compiler prints these notes when no
  // offered signature satisfies the request.
  void Withhold(std::string reason) { withheld_.push_back(std::move(reason)); }
  const std::vector<std::string>& withheld() const { return withheld_; }

 private:
  const OpConf& op_;
  AttrView attrs_;
  const std::vector<TensorDesc>& inputs_;
  const std::vector<TensorDesc>& outputs_;
  int64_t parallel_num_;
  std::vector<SbpSignature> signatures_;
  std::vector<std::string> withheld_;
};

// An SbpFn for an op with no inputs and one output (a variable, a constant):
// S(axis) for every axis with at least one element per device; B is implied.
Status SplitOutputAlongLongAxes(SbpContext* ctx);

// Passed to GradFn by autodiff (implemented in oneflow_lite/api). The rule
// reads the forward op and the gradients of its outputs, adds backward ops
// and declares the gradient of each input it differentiates.
class GradContext {
 public:
  virtual ~GradContext() = default;

  virtual const OpConf& op() const = 0;
  AttrView attrs() const { return AttrView(op()); }
  virtual int InputCount(const std::string& arg) const = 0;
  virtual const std::string& InputLbn(const std::string& arg, int index = 0) const = 0;
  virtual const TensorDesc& InputDesc(const std::string& arg, int index = 0) const = 0;
  virtual const std::string& OutputLbn(const std::string& arg, int index = 0) const = 0;
  virtual const TensorDesc& OutputDesc(const std::string& arg, int index = 0) const = 0;
  // Empty when no gradient flows into that output.
  virtual std::string OutputGradLbn(const std::string& arg, int index = 0) const = 0;
  // Whether the gradient of an input is needed (it leads to a variable).
  virtual bool NeedsInputGrad(const std::string& arg, int index = 0) const = 0;

  // Adds a backward op (shape inference runs immediately; errors name it).
  // The op's name is made unique; returns the final name. Output lbns are
  // "<returned name>/<arg>_<index>".
  virtual StatusOr<std::string> AddOp(OpConf op) = 0;
  // Declares the gradient of an input.
  virtual void SetInputGrad(const std::string& arg, int index, const std::string& lbn) = 0;
};

using InferFn = std::function<Status(InferContext*)>;
using SbpFn = std::function<Status(SbpContext*)>;
using GradFn = std::function<Status(GradContext*)>;

struct OpDef {
  std::string type;
  std::vector<std::string> inputs;          // argument names, in order
  std::vector<std::string> variadic_inputs;  // subset of inputs taking 1..n lbns
  std::vector<std::string> optional_inputs;  // subset of inputs that may be absent
  std::vector<std::string> outputs;
  std::vector<std::string> mutable_inputs;  // written in place (optimizer updates)
  // Source ops (data loaders, variables) have no inputs and run once per
  // iteration (or once per job for variables).
  bool is_source = false;
  // Ops that are part of the loss/metrics bookkeeping and never differentiated.
  bool no_grad = false;
  InferFn infer;
  SbpFn sbp;    // null: only the all-broadcast signature
  GradFn grad;  // null: not differentiable (autodiff errors if needed)
};

// Returns the definition or NotFound naming the op type (and the op name if
// given) and listing similar registered types.
StatusOr<const OpDef*> LookupOpDef(const std::string& op_type,
                                   const std::string& op_name = "");
std::vector<std::string> RegisteredOpTypes();  // sorted

// Checks the OpConf against its definition (known type, required args
// present, no unknown args) and runs inference. `inputs` holds the descs of
// the op's inputs by arg name. On success returns the output descs by arg.
StatusOr<ArgDescs> InferOp(const OpConf& op, const ArgDescs& inputs);

// Builder used by REGISTER_OP.
class OpDefBuilder {
 public:
  explicit OpDefBuilder(const std::string& type);
  OpDefBuilder& Input(const std::string& name);
  OpDefBuilder& VariadicInput(const std::string& name);
  OpDefBuilder& OptionalInput(const std::string& name);
  OpDefBuilder& Output(const std::string& name);
  OpDefBuilder& MutableInput(const std::string& name);  // also adds it as an input
  OpDefBuilder& Source();
  OpDefBuilder& NoGrad();
  OpDefBuilder& Infer(InferFn fn);
  OpDefBuilder& Sbp(SbpFn fn);
  OpDefBuilder& Grad(GradFn fn);
  const OpDef& def() const { return def_; }

 private:
  OpDef def_;
};

// Registers the built definition; CHECK-fails on a duplicate type.
class OpRegistrar {
 public:
  OpRegistrar(const OpDefBuilder& builder);  // NOLINT(runtime/explicit)
};

#define OFLITE_OP_CONCAT_INNER(a, b) a##b
#define OFLITE_OP_CONCAT(a, b) OFLITE_OP_CONCAT_INNER(a, b)
#define REGISTER_OP(type)                                                            \
  static ::oflite::OpRegistrar OFLITE_OP_CONCAT(oflite_op_registrar_, __COUNTER__) = \
      ::oflite::OpDefBuilder(type)

}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_OP_DEF_H_
