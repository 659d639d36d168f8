// What the dataset source kernels (fashion_mnist, npy_dataset) share: the
// attributes that choose and normalize their batches, the epoch batches these
// imply on this device, and the loop that writes one batch.
//
// A source reads batch_size (required), shuffle (default true), seed (default
// the job's) and mean/std (default 0/1). At iteration t it produces this
// device's rows of EpochBatches' batch t (batch_shard.h): every value v of a
// sample as the float32 v * scale - shift (the kernel derives scale and shift
// from its attributes), and the sample's label.
//
// Header-only; thread-compatible (the state is one kernel's).
#ifndef ONEFLOW_LITE_KERNELS_CPU_DATA_DATASET_SOURCE_H_
#define ONEFLOW_LITE_KERNELS_CPU_DATA_DATASET_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/kernels/cpu/data/batch_shard.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {

struct DatasetSourceAttrs {
  int64_t batch_size = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  double mean = 0.0;
  double std = 1.0;
};

// Reads the attributes above; an error only when batch_size is missing or
// not an int.
inline StatusOr<DatasetSourceAttrs> ReadDatasetSourceAttrs(const KernelInitContext& ctx) {
  const AttrView attrs = ctx.attrs();
  DatasetSourceAttrs result;
  ASSIGN_OR_RETURN(result.batch_size, attrs.GetInt("batch_size"));
  result.shuffle = attrs.GetBoolOr("shuffle", true);
  result.seed = static_cast<uint64_t>(attrs.GetIntOr("seed", ctx.seed));
  result.mean = attrs.GetFloatOr("mean", 0.0);
  result.std = attrs.GetFloatOr("std", 1.0);
  return result;
}

// The batches of a source of `count` samples. batch_size must be in
// [1, count], else InvalidArgument prefixed with `where` that says the
// samples are in `samples_in` (e.g. "the split"); the outputs must hold this
// device's shard of rows of `values_per_row` values (CheckBatchOutputs).
inline StatusOr<EpochBatches> MakeEpochBatches(const KernelInitContext& ctx,
                                               const std::string& where,
                                               const DatasetSourceAttrs& attrs, int64_t count,
                                               int64_t values_per_row,
                                               const std::string& samples_in) {
  if (attrs.batch_size <= 0 || attrs.batch_size > count) {
    return InvalidArgumentError(where, ": batch_size ", attrs.batch_size, " must be in [1, ", count,
                                "] (samples in ", samples_in, ")");
  }
  ASSIGN_OR_RETURN(BatchShard shard, ResolveBatchShard(ctx, attrs.batch_size));
  RETURN_IF_ERROR(CheckBatchOutputs(ctx, shard, values_per_row));
  return EpochBatches(count, attrs.batch_size, attrs.shuffle, attrs.seed, shard);
}

// Writes this device's batch at ctx->iteration() to the outputs "image" and
// "label": row r is sample s = batches->Samples(iteration)[r], its
// `values_per_row` values v = sample_values(s)[i] written as v * scale - shift
// and its label labels[s]. A negative iteration is an error.
template <typename SampleFn, typename Label>
Status WriteNormalizedBatch(KernelContext* ctx, EpochBatches* batches, int64_t values_per_row,
                            float scale, float shift, const SampleFn& sample_values,
                            const std::vector<Label>& labels) {
  if (ctx->iteration() < 0) return ctx->Error("negative iteration");
  float* image = ctx->Output("image")->data<float>();
  int32_t* label = ctx->Output("label")->data<int32_t>();
  const int64_t* samples = batches->Samples(ctx->iteration());
  for (int64_t row = 0; row < batches->rows(); ++row) {
    const int64_t sample = samples[row];
    const auto* source = sample_values(sample);
    float* target = image + row * values_per_row;
    for (int64_t i = 0; i < values_per_row; ++i) target[i] = source[i] * scale - shift;
    label[row] = labels[sample];
  }
  return Status::OK();
}

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_DATA_DATASET_SOURCE_H_
