// Which rows of a logical batch a data-source kernel produces on its device.
//
// When the compiler splits a source's outputs S(0) over p devices, each
// device's plan gives it outputs of batch / p rows, and device k produces
// rows [k * batch / p, (k + 1) * batch / p) of the logical batch, so the
// shards of a p-device run, concatenated in device order, are exactly the
// batch of a 1-device run. A batch p does not divide (only for a source
// with the uneven_split attribute) is cut by the balanced rule (common/partition.h): device k
// gets batch / p rows, plus one if k < batch % p, as the compiler's
// physical shapes say. When the outputs are broadcast (or p = 1) the
// physical batch equals the logical one and every device produces it all.
// Any other physical batch is an error naming the op and the device.
#ifndef ONEFLOW_LITE_KERNELS_CPU_DATA_BATCH_SHARD_H_
#define ONEFLOW_LITE_KERNELS_CPU_DATA_BATCH_SHARD_H_

#include <cstdint>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {

struct BatchShard {
  int64_t begin = 0;  // first logical row produced here
  int64_t size = 0;   // rows produced here (the physical batch)
};

// Reads the physical batch from the "image" and "label" outputs of `ctx`.
inline StatusOr<BatchShard> ResolveBatchShard(const KernelInitContext& ctx, int64_t logical_batch) {
  const int64_t physical = ctx.Output("image").shape.dim(0);
  const auto error = [&](const auto&... args) {
    return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                ") on parallel_id ", ctx.parallel_id, " of ", ctx.parallel_num,
                                ": ", args...);
  };
  if (ctx.Output("label").shape.dim(0) != physical) {
    return error("image and label outputs have different batch sizes (", physical, " vs ",
                 ctx.Output("label").shape.dim(0), ")");
  }
  if (physical == logical_batch) return BatchShard{0, physical};
  if (ctx.parallel_num > 1 && logical_batch % ctx.parallel_num == 0 &&
      physical == logical_batch / ctx.parallel_num) {
    return BatchShard{ctx.parallel_id * physical, physical};
  }
  // uneven_split (the op's opt-in): the balanced part of this device.
  if (ctx.attrs().GetBoolOr("uneven_split", false) && ctx.parallel_num > 1 &&
      ctx.parallel_id >= 0 && ctx.parallel_id < ctx.parallel_num) {
    const PartRange part = BalancedPart(logical_batch, ctx.parallel_num, ctx.parallel_id);
    if (physical == part.size) return BatchShard{part.begin, physical};
  }
  return error("physical batch ", physical, " is neither the logical batch ", logical_batch,
               " nor an even S(0) shard of it (nor, with uneven_split, its balanced shard)");
}

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_DATA_BATCH_SHARD_H_
