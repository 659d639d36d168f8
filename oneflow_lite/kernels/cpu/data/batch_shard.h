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
#include <vector>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/data/fashion_mnist.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {

struct BatchShard {
  int64_t begin = 0;  // first logical row produced here
  int64_t size = 0;   // rows produced here (the physical batch)
};

// Reads the physical batch from the two outputs of `ctx` (a source's
// "image" and "label" unless named; token_window's "input" and "target").
inline StatusOr<BatchShard> ResolveBatchShard(const KernelInitContext& ctx, int64_t logical_batch,
                                              const char* first = "image",
                                              const char* second = "label") {
  const auto error = [&](const auto&... args) {
    return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                ") on parallel_id ", ctx.parallel_id, " of ", ctx.parallel_num,
                                ": ", args...);
  };
  // A corrupt plan may give an output no batch axis (a scalar).
  for (const char* name : {first, second}) {
    if (ctx.Output(name).shape.rank() < 1) {
      return error(name, " output ", ctx.Output(name).shape, " has no batch axis");
    }
  }
  const int64_t physical = ctx.Output(first).shape.dim(0);
  if (ctx.Output(second).shape.dim(0) != physical) {
    return error(first, " and ", second, " outputs have different batch sizes (", physical,
                 " vs ", ctx.Output(second).shape.dim(0), ")");
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

// A source's Forward writes `shard.size` rows of `values_per_row` values to
// "image" and `shard.size` labels to "label": the planned outputs must
// hold exactly that, else (a plan whose attributes and blob shapes
// disagree) InvalidArgument naming the op, instead of an overrun.
inline Status CheckBatchOutputs(const KernelInitContext& ctx, const BatchShard& shard,
                                int64_t values_per_row) {
  const TensorDesc& image = ctx.Output("image");
  const TensorDesc& label = ctx.Output("label");
  if (image.shape.rank() < 1 || image.shape.Count(1) != values_per_row ||
      label.shape.elem_count() != shard.size) {
    return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                "): outputs image ", image.shape, " and label ", label.shape,
                                " do not hold ", shard.size, " rows of ", values_per_row,
                                " values and their labels, as its attributes say");
  }
  return Status::OK();
}

// The samples a dataset source produces on its device: at iteration t,
// batch t % batches_per_epoch of epoch t / batches_per_epoch
// (batches_per_epoch = count / batch_size; the last partial batch is
// dropped) in EpochOrder(count, shuffle, seed, epoch), rows
// [shard.begin, shard.begin + shard.size) of it. The batch depends only on
// (seed, t), so every device and every restart sees the same samples. The
// current epoch's order is cached. Not thread-safe (one kernel's state).
class EpochBatches {
 public:
  EpochBatches() = default;
  // count >= batch_size >= 1 (the kernels check it, naming the op).
  EpochBatches(int64_t count, int64_t batch_size, bool shuffle, uint64_t seed, BatchShard shard)
      : count_(count), batch_size_(batch_size), batches_per_epoch_(count / batch_size),
        shuffle_(shuffle), seed_(seed), shard_(shard) {}

  int64_t rows() const { return shard_.size; }
  // The dataset index of each of this device's rows at `iteration` (>= 0):
  // rows() entries, valid until the next call.
  const int64_t* Samples(int64_t iteration) {
    const int64_t epoch = iteration / batches_per_epoch_;
    if (epoch != cached_epoch_) {
      order_ = EpochOrder(count_, shuffle_, seed_, epoch);
      cached_epoch_ = epoch;
    }
    return order_.data() + (iteration % batches_per_epoch_) * batch_size_ + shard_.begin;
  }

 private:
  int64_t count_ = 0;
  int64_t batch_size_ = 1;
  int64_t batches_per_epoch_ = 1;
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  BatchShard shard_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_DATA_BATCH_SHARD_H_
