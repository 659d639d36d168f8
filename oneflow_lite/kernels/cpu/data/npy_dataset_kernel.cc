// CPU kernel of `npy_dataset`: loads <path>/<split>_x.npy and _y.npy once
// in Init (data/npy_dataset.h; a file's error names it) and, like
// fashion_mnist, produces at iteration t batch t % batches_per_epoch of
// epoch t / batches_per_epoch in EpochOrder(seed, epoch) (shuffled by the
// seed when `shuffle`), this device's rows of it (batch_shard.h: the
// shards of a data-parallel run are the batch of one device).
// Samples: (x * scale - mean) / std as float32.
#include <string>

#include "oneflow_lite/data/npy_dataset.h"
#include "oneflow_lite/kernels/cpu/data/dataset_source.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace {

class NpyDatasetKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    const std::string where = "op '" + ctx.op->name() + "' (npy_dataset)";
    ASSIGN_OR_RETURN(DatasetSourceAttrs source, ReadDatasetSourceAttrs(ctx));
    AttrView attrs = ctx.attrs();
    const double scale = attrs.GetFloatOr("scale", 1.0);
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
    ASSIGN_OR_RETURN(batches_,
                     MakeEpochBatches(ctx, where, source, dataset_.count, dataset_.sample_size,
                                      "'" + NpyDatasetFiles(dir, split).samples + "'"));
    scale_ = static_cast<float>(scale / source.std);
    shift_ = static_cast<float>(source.mean / source.std);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    return WriteNormalizedBatch(
        ctx, &batches_, dataset_.sample_size, scale_, shift_,
        [this](int64_t sample) { return dataset_.Sample(sample); }, dataset_.labels);
  }

 private:
  NpyDataset dataset_;
  float scale_ = 1.f;
  float shift_ = 0.f;
  EpochBatches batches_;
};

REGISTER_KERNEL("npy_dataset", DEVICE_CPU, DT_FLOAT, NpyDatasetKernel);

}  // namespace
}  // namespace oflite
