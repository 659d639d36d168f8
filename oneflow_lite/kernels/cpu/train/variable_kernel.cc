// CPU kernel of `variable`: fills its output with the initializer's values.
//
// Every element's value is a pure function of (seed, logical index) (see
// data/counter_rng.h), so a device holding a shard S(axis) computes exactly
// its slice of the full logical tensor without generating the rest. Shards
// follow the balanced split: along an axis of length n over p devices,
// device k gets n / p elements, plus one if k < n % p, in device order.
#include <algorithm>
#include <cstdint>
#include <string>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/data/counter_rng.h"
#include "oneflow_lite/kernels/cpu/train/initial_values.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/train/initializer.h"

namespace oflite {
namespace {

template <typename T>
class VariableKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    const OpConf& op = *ctx.op;
    ASSIGN_OR_RETURN(logical_, ctx.attrs().GetShape("shape"));
    ASSIGN_OR_RETURN(config_, InitializerFromAttrs(op, logical_));
    seed_ = EffectiveSeed(op, ctx.seed);
    const Shape& physical = ctx.Output("out").shape;
    ASSIGN_OR_RETURN(split_axis_, FindSplitAxis(ctx, physical));
    if (split_axis_ < 0) return Status::OK();
    if (ctx.parallel_num < 1 || ctx.parallel_id < 0 || ctx.parallel_id >= ctx.parallel_num) {
      return InvalidArgumentError("op '", op.name(), "' (variable): parallel_id ", ctx.parallel_id,
                                  " outside ", ctx.parallel_num, " devices");
    }
    range_ = BalancedPart(logical_.dim(split_axis_), ctx.parallel_num, ctx.parallel_id);
    const Shape expected = BalancedPartShape(logical_, split_axis_, ctx.parallel_num,
                                             ctx.parallel_id);
    if (expected != physical) {
      return InvalidArgumentError("op '", op.name(), "' (variable) on parallel_id ",
                                  ctx.parallel_id, " of ", ctx.parallel_num, ": shard of ",
                                  logical_, " split on axis ", split_axis_, " should be ", expected,
                                  ", the plan gives ", physical);
    }
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    Blob* out = ctx->Output("out");
    T* data = out->data<T>();
    if (split_axis_ < 0) {
      for (int64_t i = 0; i < out->elem_count(); ++i) {
        data[i] = static_cast<T>(InitialValue(config_, seed_, i));
      }
      return Status::OK();
    }
    const int64_t outer = logical_.Count(0, split_axis_);
    const int64_t inner = logical_.Count(split_axis_ + 1);
    const int64_t logical_length = logical_.dim(split_axis_);
    const int64_t shard_length = range_.size;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t a = 0; a < shard_length; ++a) {
        const int64_t logical_row = (o * logical_length + range_.begin + a) * inner;
        T* row = data + (o * shard_length + a) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          row[i] = static_cast<T>(InitialValue(config_, seed_, logical_row + i));
        }
      }
    }
    return Status::OK();
  }

 private:
  // The attr "split_axis" when the compiler set it (>= 0); otherwise the one
  // axis where the physical shape differs from the logical one (-1: none).
  StatusOr<int64_t> FindSplitAxis(const KernelInitContext& ctx, const Shape& physical) const {
    const int64_t attr_axis = ctx.attrs().GetIntOr("split_axis", -1);
    if (attr_axis >= 0 || physical == logical_) return attr_axis;
    int64_t axis = -1;
    if (physical.rank() == logical_.rank()) {
      for (int64_t d = 0; d < logical_.rank(); ++d) {
        if (physical.dim(d) == logical_.dim(d)) continue;
        if (axis >= 0) axis = -2;  // differs on two axes
        if (axis == -1) axis = d;
      }
    }
    if (axis < 0) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (variable): physical shape ", physical,
                                  " is not a one-axis shard of ", logical_);
    }
    return axis;
  }

  Shape logical_;
  InitializerConfig config_;
  uint64_t seed_ = 0;
  int64_t split_axis_ = -1;
  PartRange range_;
};

REGISTER_KERNEL("variable", DEVICE_CPU, DT_FLOAT, VariableKernel<float>);
REGISTER_KERNEL("variable", DEVICE_CPU, DT_DOUBLE, VariableKernel<double>);

}  // namespace
}  // namespace oflite
