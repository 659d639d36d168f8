// CPU kernel of `fashion_mnist`: loads the split once in Init and, at
// iteration t, produces batch t % batches_per_epoch of epoch
// t / batches_per_epoch (batches_per_epoch = count / batch_size; the last
// partial batch is dropped). The epoch's order is EpochOrder(seed, epoch),
// so the batch depends only on (seed, t): every device and every restart
// (from a checkpoint at iteration t) sees the same samples.
// Pixels: (p / 255 - mean) / std as float32.
#include <string>
#include <vector>

#include "oneflow_lite/data/fashion_mnist.h"
#include "oneflow_lite/kernels/cpu/data/batch_shard.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace {

class FashionMnistKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    const std::string where = "op '" + ctx.op->name() + "' (fashion_mnist)";
    AttrView attrs = ctx.attrs();
    ASSIGN_OR_RETURN(batch_size_, attrs.GetInt("batch_size"));
    shuffle_ = attrs.GetBoolOr("shuffle", true);
    seed_ = static_cast<uint64_t>(attrs.GetIntOr("seed", ctx.seed));
    mean_ = attrs.GetFloatOr("mean", 0.0);
    std_ = attrs.GetFloatOr("std", 1.0);
    const std::string dir = attrs.GetStringOr("path", kFashionMnistDefaultDir);
    StatusOr<ImageDataset> dataset = LoadFashionMnist(dir, attrs.GetStringOr("split", "train"));
    if (!dataset.ok()) return dataset.status().WithContext(where);
    dataset_ = std::move(dataset).value();
    if (dataset_.rows != 28 || dataset_.cols != 28) {
      return InvalidArgumentError(where, ": images in '", dir, "' are ", dataset_.rows, "x",
                                  dataset_.cols, ", expected 28x28");
    }
    if (batch_size_ <= 0 || batch_size_ > dataset_.count) {
      return InvalidArgumentError(where, ": batch_size ", batch_size_, " must be in [1, ",
                                  dataset_.count, "] (samples in the split)");
    }
    ASSIGN_OR_RETURN(BatchShard shard, ResolveBatchShard(ctx, batch_size_));
    RETURN_IF_ERROR(CheckBatchOutputs(ctx, shard, dataset_.rows * dataset_.cols));
    batches_ = EpochBatches(dataset_.count, batch_size_, shuffle_, seed_, shard);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    if (ctx->iteration() < 0) return ctx->Error("negative iteration");
    const int64_t pixels = dataset_.rows * dataset_.cols;
    float* image = ctx->Output("image")->data<float>();
    int32_t* label = ctx->Output("label")->data<int32_t>();
    const float scale = static_cast<float>(1.0 / (255.0 * std_));
    const float shift = static_cast<float>(mean_ / std_);
    const int64_t* samples = batches_.Samples(ctx->iteration());
    for (int64_t row = 0; row < batches_.rows(); ++row) {
      const int64_t sample = samples[row];
      const uint8_t* source = dataset_.Image(sample);
      float* target = image + row * pixels;
      for (int64_t p = 0; p < pixels; ++p) target[p] = source[p] * scale - shift;
      label[row] = dataset_.labels[sample];
    }
    return Status::OK();
  }

 private:
  ImageDataset dataset_;
  int64_t batch_size_ = 0;
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  double mean_ = 0.0;
  double std_ = 1.0;
  EpochBatches batches_;
};

REGISTER_KERNEL("fashion_mnist", DEVICE_CPU, DT_FLOAT, FashionMnistKernel);

}  // namespace
}  // namespace oflite
