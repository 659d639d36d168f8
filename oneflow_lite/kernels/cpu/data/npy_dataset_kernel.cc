// CPU kernel of `npy_dataset`: loads <path>/<split>_x.npy and _y.npy once
// in Init (data/npy_dataset.h; a file's error names it) and, like
// fashion_mnist, produces at iteration t batch t % batches_per_epoch of
// epoch t / batches_per_epoch in EpochOrder(seed, epoch) (shuffled by the
// seed when `shuffle`), this device's rows of it (batch_shard.h: the
// shards of a data-parallel run are the batch of one device).
// Samples: (x * scale - mean) / std as float32.
#include <string>
#include <vector>

#include "oneflow_lite/data/fashion_mnist.h"
#include "oneflow_lite/data/npy_dataset.h"
#include "oneflow_lite/kernels/cpu/data/batch_shard.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace {

class NpyDatasetKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    const std::string where = "op '" + ctx.op->name() + "' (npy_dataset)";
    AttrView attrs = ctx.attrs();
    ASSIGN_OR_RETURN(batch_size_, attrs.GetInt("batch_size"));
    shuffle_ = attrs.GetBoolOr("shuffle", true);
    seed_ = static_cast<uint64_t>(attrs.GetIntOr("seed", ctx.seed));
    scale_ = attrs.GetFloatOr("scale", 1.0);
    mean_ = attrs.GetFloatOr("mean", 0.0);
    std_ = attrs.GetFloatOr("std", 1.0);
    ASSIGN_OR_RETURN(Shape sample, attrs.GetShape("sample_shape"));
    ASSIGN_OR_RETURN(std::string dir, attrs.GetString("path"));
    const std::string split = attrs.GetStringOr("split", "train");
    StatusOr<NpyDataset> dataset = LoadNpyDataset(dir, split);
    if (!dataset.ok()) return dataset.status().WithContext(where);
    dataset_ = std::move(dataset).value();
    if (Shape(dataset_.sample_shape) != sample) {
      return InvalidArgumentError(where, ": '", NpyDatasetFiles(dir, split).samples,
                                  "' holds samples of shape ", Shape(dataset_.sample_shape),
                                  ", the plan was built for ", sample,
                                  " (rebuild the job for these files)");
    }
    if (batch_size_ <= 0 || batch_size_ > dataset_.count) {
      return InvalidArgumentError(where, ": batch_size ", batch_size_, " must be in [1, ",
                                  dataset_.count, "] (samples in '",
                                  NpyDatasetFiles(dir, split).samples, "')");
    }
    ASSIGN_OR_RETURN(BatchShard shard, ResolveBatchShard(ctx, batch_size_));
    RETURN_IF_ERROR(CheckBatchOutputs(ctx, shard, dataset_.sample_size));
    batches_ = EpochBatches(dataset_.count, batch_size_, shuffle_, seed_, shard);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    if (ctx->iteration() < 0) return ctx->Error("negative iteration");
    const int64_t size = dataset_.sample_size;
    float* image = ctx->Output("image")->data<float>();
    int32_t* label = ctx->Output("label")->data<int32_t>();
    const float scale = static_cast<float>(scale_ / std_);
    const float shift = static_cast<float>(mean_ / std_);
    const int64_t* samples = batches_.Samples(ctx->iteration());
    for (int64_t row = 0; row < batches_.rows(); ++row) {
      const int64_t sample = samples[row];
      const float* source = dataset_.Sample(sample);
      float* target = image + row * size;
      for (int64_t i = 0; i < size; ++i) target[i] = source[i] * scale - shift;
      label[row] = dataset_.labels[sample];
    }
    return Status::OK();
  }

 private:
  NpyDataset dataset_;
  int64_t batch_size_ = 0;
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  double scale_ = 1.0;
  double mean_ = 0.0;
  double std_ = 1.0;
  EpochBatches batches_;
};

REGISTER_KERNEL("npy_dataset", DEVICE_CPU, DT_FLOAT, NpyDatasetKernel);

}  // namespace
}  // namespace oflite
