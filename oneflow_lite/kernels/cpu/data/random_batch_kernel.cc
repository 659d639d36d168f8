// CPU kernel of `random_batch`: synthetic, learnable data for tests.
//
// Row g of the logical batch at iteration t draws from
// CounterRng(DeriveStreamSeed(DeriveStreamSeed(seed, t), g)): first its label
// (uniform in [0, num_classes)), then each feature j as
// uniform[-0.5, 0.5) + (j % num_classes == label ? 1 : 0). Values depend only
// on (seed, t, g), so shards of an S(0) split concatenate to the 1-device
// batch and a linear classifier can learn the labels.
#include <algorithm>
#include <cstdint>

#include "oneflow_lite/data/counter_rng.h"
#include "oneflow_lite/kernels/cpu/data/batch_shard.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace {

template <typename T>
class RandomBatchKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(Shape logical, ctx.attrs().GetShape("shape"));
    ASSIGN_OR_RETURN(num_classes_, ctx.attrs().GetInt("num_classes"));
    if (logical.rank() < 1 || num_classes_ <= 0) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (random_batch): bad shape ", logical,
                                  " or num_classes ", num_classes_);
    }
    seed_ = static_cast<uint64_t>(ctx.attrs().GetIntOr("seed", ctx.seed));
    features_ = logical.Count(1);
    ASSIGN_OR_RETURN(shard_, ResolveBatchShard(ctx, logical.dim(0)));
    return CheckBatchOutputs(ctx, shard_, features_);
  }

  Status Forward(KernelContext* ctx) override {
    const uint64_t stream = DeriveStreamSeed(seed_, static_cast<uint64_t>(ctx->iteration()));
    T* image = ctx->Output("image")->data<T>();
    int32_t* label = ctx->Output("label")->data<int32_t>();
    // Rows are independent (each its own stream), so the device's threads
    // split them and the bytes do not depend on how.
    ParallelRows(shard_.size, features_, [&](int64_t begin, int64_t end) {
      double uniforms[kChunk];
      for (int64_t row = begin; row < end; ++row) {
        CounterRng rng(DeriveStreamSeed(stream, static_cast<uint64_t>(shard_.begin + row)));
        const int64_t row_label = static_cast<int64_t>(rng.NextBelow(num_classes_));
        label[row] = static_cast<int32_t>(row_label);
        T* features = image + row * features_;
        // The features in chunks of uniforms drawn together (the same
        // values as one NextUniform() per feature); a feature is
        // uniform - 0.5, plus 1 where j % num_classes == label, the sum
        // rounded to T once, as the one-at-a-time formula did.
        for (int64_t chunk = 0; chunk < features_; chunk += kChunk) {
          const int64_t count = std::min(kChunk, features_ - chunk);
          rng.NextUniforms(count, uniforms);
          T* out = features + chunk;
          for (int64_t j = 0; j < count; ++j) out[j] = static_cast<T>(uniforms[j] - 0.5);
          int64_t signal = row_label - chunk % num_classes_;
          if (signal < 0) signal += num_classes_;
          for (int64_t j = signal; j < count; j += num_classes_) {
            out[j] = static_cast<T>(uniforms[j] - 0.5 + 1.0);
          }
        }
      }
    });
    return Status::OK();
  }

 private:
  static constexpr int64_t kChunk = 512;  // uniforms per draw (4 KiB, in L1)
  int64_t num_classes_ = 1;
  int64_t features_ = 1;
  uint64_t seed_ = 0;
  BatchShard shard_;
};

REGISTER_KERNEL("random_batch", DEVICE_CPU, DT_FLOAT, RandomBatchKernel<float>);
REGISTER_KERNEL("random_batch", DEVICE_CPU, DT_DOUBLE, RandomBatchKernel<double>);

}  // namespace
}  // namespace oflite
