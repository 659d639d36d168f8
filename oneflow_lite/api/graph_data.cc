// Graph::NpyData (the npy_dataset source, data/npy_dataset.h) and
// Graph::SelectRows (select_rows, a data-dependent shape).
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/data/npy_dataset.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {

Batch Graph::NpyData(const std::string& dir, int64_t batch_size, const SbpParallel& sbp,
                     const NpyDataOptions& options) {
  if (!ok()) return {};
  if (options.split != "train" && options.split != "test") {
    RecordError(InvalidArgumentError("NpyData: split must be \"train\" or \"test\", got \"",
                                     options.split, "\""));
    return {};
  }
  StatusOr<NpySplitInfo> info = ReadNpySplitInfo(dir, options.split);
  if (!info.ok()) {
    RecordError(info.status().WithContext("NpyData"));
    return {};
  }
  if (batch_size <= 0 || batch_size > info->count) {
    RecordError(InvalidArgumentError("NpyData: batch size ", batch_size, " must be in [1, ",
                                     info->count, "] (samples in '",
                                     NpyDatasetFiles(dir, options.split).samples, "')"));
    return {};
  }
  // The evaluation job reads the test split when it exists and fits a batch.
  int64_t test_count = 0;
  if (options.split == "train") {
    StatusOr<NpySplitInfo> test = ReadNpySplitInfo(dir, "test");
    if (test.ok() && test->sample_shape == info->sample_shape) test_count = test->count;
  }
  const std::string name = LayerName("npy_dataset", options.name);
  OpConf op = OpConfBuilder("npy_dataset", name)
                  .Output("image")
                  .Output("label")
                  .Attr("path", dir)
                  .Attr("split", options.split)
                  .Attr("batch_size", batch_size)
                  .Attr("shuffle", options.shuffle)
                  .Attr("seed", NextSeed())
                  .Attr("sample_shape", Shape(info->sample_shape))
                  .Attr("scale", options.scale)
                  .Attr("mean", options.mean)
                  .Attr("std", options.std)
                  .Attr("count", info->count)
                  .Attr("test_count", test_count)
                  .Build();
  return EmitDataSource(std::move(op), options.uneven_split, sbp, batch_size, options.split,
                        info->count);
}

Tensor Graph::SelectRows(const Tensor& x, const Tensor& mask) {
  if (!ok() || !CheckInputs("SelectRows", {&x, &mask})) return {};
  return EmitOne(OpConfBuilder("select_rows", OpName("select_rows"))
                     .Input("x", x.lbn)
                     .Input("mask", mask.lbn)
                     .Output("y")
                     .Build());
}

}  // namespace oflite
