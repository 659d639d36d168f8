// CPU kernel of `fashion_mnist`: loads the split once in Init and, at
// iteration t, produces batch t % batches_per_epoch of epoch
// t / batches_per_epoch (batches_per_epoch = count / batch_size; the last
// partial batch is dropped). The epoch's order is EpochOrder(seed, epoch),
// so the batch depends only on (seed, t): every device and every restart
// (from a checkpoint at iteration t) sees the same samples.
// Pixels: (p / 255 - mean) / std as float32.
#include <string>

#include "oneflow_lite/data/fashion_mnist.h"
#include "oneflow_lite/kernels/cpu/data/dataset_source.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace {

class FashionMnistKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    const std::string where = "op '" + ctx.op->name() + "' (fashion_mnist)";
    ASSIGN_OR_RETURN(DatasetSourceAttrs source, ReadDatasetSourceAttrs(ctx));
    AttrView attrs = ctx.attrs();
    const std::string dir = attrs.GetStringOr("path", kFashionMnistDefaultDir);
    StatusOr<ImageDataset> dataset = LoadFashionMnist(dir, attrs.GetStringOr("split", "train"));
    if (!dataset.ok()) return dataset.status().WithContext(where);
    dataset_ = std::move(dataset).value();
    if (dataset_.rows != 28 || dataset_.cols != 28) {
      return InvalidArgumentError(where, ": images in '", dir, "' are ", dataset_.rows, "x",
                                  dataset_.cols, ", expected 28x28");
    }
    ASSIGN_OR_RETURN(batches_, MakeEpochBatches(ctx, where, source, dataset_.count,
                                                dataset_.rows * dataset_.cols, "the split"));
    scale_ = static_cast<float>(1.0 / (255.0 * source.std));
    shift_ = static_cast<float>(source.mean / source.std);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    return WriteNormalizedBatch(
        ctx, &batches_, dataset_.rows * dataset_.cols, scale_, shift_,
        [this](int64_t sample) { return dataset_.Image(sample); }, dataset_.labels);
  }

 private:
  ImageDataset dataset_;
  float scale_ = 1.f;
  float shift_ = 0.f;
  EpochBatches batches_;
};

REGISTER_KERNEL("fashion_mnist", DEVICE_CPU, DT_FLOAT, FashionMnistKernel);

}  // namespace
}  // namespace oflite
