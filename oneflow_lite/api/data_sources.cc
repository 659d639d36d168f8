#include "oneflow_lite/api/data_sources.h"

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/data/npy_dataset.h"
#include "oneflow_lite/data/token_file.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {
namespace {

bool FileExists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// Adds the source op (outputs image, label; uneven_split set when asked),
// hints `sbp` on both and tells the graph the batch size and the
// `train_examples` of a training split (0 for any other).
Batch EmitSource(Graph* g, OpConf op, bool uneven_split, const SbpParallel& sbp, int64_t batch_size,
                 int64_t train_examples) {
  // Only when asked, so the Jobs of existing models stay byte-identical.
  if (uneven_split) SetBoolAttr(&op, "uneven_split", true);
  std::vector<Tensor> outputs = g->Emit(std::move(op));
  if (outputs.size() != 2) return {};
  Batch batch{outputs[0], outputs[1]};
  g->HintSbp(batch.image, sbp);
  g->HintSbp(batch.label, sbp);
  g->RecordDataSource(batch_size, train_examples);
  return batch;
}

// An error naming `source` unless `split` is "train" or "test".
bool CheckSplit(Graph* g, const char* source, const std::string& split) {
  if (split == "train" || split == "test") return true;
  g->RecordError(
      InvalidArgumentError(source, ": split must be \"train\" or \"test\", got \"", split, "\""));
  return false;
}

}  // namespace

Batch FashionMnist(Graph* g, const std::string& path, int64_t batch_size, const SbpParallel& sbp,
                   const FashionMnistOptions& options) {
  if (!g->ok() || !CheckSplit(g, "FashionMnist", options.split)) return {};
  if (options.check_path) {
    const std::string prefix = options.split == "train" ? "train" : "t10k";
    for (const char* kind : {"-images-idx3-ubyte", "-labels-idx1-ubyte"}) {
      const std::string file = path + "/" + prefix + kind;
      if (!FileExists(file) && !FileExists(file + ".gz")) {
        g->RecordError(NotFoundError("FashionMnist: dataset path '", path, "' has no '", prefix,
                                     kind, "[.gz]' (install dataset-fashion-mnist?)"));
        return {};
      }
    }
  }
  const std::string name = g->UniqueName("fashion_mnist", options.name);
  OpConf op = OpConfBuilder("fashion_mnist", name)
                  .Output("image")
                  .Output("label")
                  .Attr("path", path)
                  .Attr("split", options.split)
                  .Attr("batch_size", batch_size)
                  .Attr("shuffle", options.shuffle)
                  .Attr("seed", g->NextSeed())
                  .Attr("mean", options.mean)
                  .Attr("std", options.std)
                  .Attr("flatten", options.flatten)
                  .Build();
  return EmitSource(g, std::move(op), options.uneven_split, sbp, batch_size,
                    options.split == "train" ? kFashionMnistTrainSize : 0);
}

Batch NpyData(Graph* g, const std::string& dir, int64_t batch_size, const SbpParallel& sbp,
              const NpyDataOptions& options) {
  if (!g->ok() || !CheckSplit(g, "NpyData", options.split)) return {};
  StatusOr<NpySplitInfo> info = ReadNpySplitInfo(dir, options.split);
  if (!info.ok()) {
    g->RecordError(info.status().WithContext("NpyData"));
    return {};
  }
  if (batch_size <= 0 || batch_size > info->count) {
    g->RecordError(InvalidArgumentError("NpyData: batch size ", batch_size, " must be in [1, ",
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
  const std::string name = g->UniqueName("npy_dataset", options.name);
  OpConf op = OpConfBuilder("npy_dataset", name)
                  .Output("image")
                  .Output("label")
                  .Attr("path", dir)
                  .Attr("split", options.split)
                  .Attr("batch_size", batch_size)
                  .Attr("shuffle", options.shuffle)
                  .Attr("seed", g->NextSeed())
                  .Attr("sample_shape", Shape(info->sample_shape))
                  .Attr("scale", options.scale)
                  .Attr("mean", options.mean)
                  .Attr("std", options.std)
                  .Attr("count", info->count)
                  .Attr("test_count", test_count)
                  .Build();
  return EmitSource(g, std::move(op), options.uneven_split, sbp, batch_size,
                    options.split == "train" ? info->count : 0);
}

Batch RandomBatch(Graph* g, const Shape& image_shape, int64_t num_classes, const SbpParallel& sbp,
                  DataType dtype, const std::string& name) {
  if (!g->ok()) return {};
  OpConf op = OpConfBuilder("random_batch", g->UniqueName("random_batch", name))
                  .Output("image")
                  .Output("label")
                  .Attr("shape", image_shape)
                  .Attr("num_classes", num_classes)
                  .Attr("dtype", dtype)
                  .Attr("seed", g->NextSeed())
                  .Build();
  const int64_t batch_size = image_shape.rank() > 0 ? image_shape.dim(0) : 0;
  return EmitSource(g, std::move(op), /*uneven_split=*/false, sbp, batch_size,
                    /*train_examples=*/0);
}

Tensor HostInput(Graph* g, const std::string& feed, const Shape& shape, DataType dtype,
                 const std::string& name, std::chrono::milliseconds timeout) {
  if (!g->ok()) return {};
  OpConf op = OpConfBuilder("host_feed", g->UniqueName("host_feed", name))
                  .Output("out")
                  .Attr("feed", feed)
                  .Attr("shape", shape)
                  .Attr("dtype", dtype)
                  .Attr("timeout_ms", static_cast<int64_t>(timeout.count()))
                  .Build();
  Tensor out = g->EmitOne(std::move(op));
  if (!g->ok()) return {};
  g->RecordDataSource(shape.rank() > 0 ? shape.dim(0) : 1, /*train_examples=*/0);
  return out;
}

namespace {

// The arguments TokenWindows and CheckTokenWindows share; an error names
// the file.
Status CheckTokenWindowArgs(const std::string& path, int64_t batch, int64_t block,
                            int64_t vocab_size, const TokenWindowOptions& options) {
  if (options.split != "train" && options.split != "test") {
    return InvalidArgumentError("split must be \"train\" or \"test\", got \"", options.split, "\"");
  }
  if (batch <= 0) return InvalidArgumentError("'", path, "': batch must be > 0, got ", batch);
  if (block <= 0) return InvalidArgumentError("'", path, "': block must be > 0, got ", block);
  if (vocab_size <= 0 || vocab_size > INT32_MAX) {
    return InvalidArgumentError("'", path, "': vocab_size must be in [1, 2^31 - 1], got ",
                                vocab_size);
  }
  if (options.eval_batches < 0) {
    return InvalidArgumentError("'", path, "': eval_batches must be >= 0, got ",
                                options.eval_batches);
  }
  return Status::OK();
}

// Whether the evaluation job will read the test split.
bool EvaluatesTestSplit(const TokenWindowOptions& options) {
  return options.eval_batches > 0 && options.val_fraction > 0.0;
}

// The used split, and the test split when evaluated, hold a window each.
Status CheckTokenSplits(const std::string& path, int64_t count, int64_t block,
                        const TokenWindowOptions& options) {
  ASSIGN_OR_RETURN(TokenSplit used, TokenSplitRange(count, options.split, options.val_fraction));
  RETURN_IF_ERROR(CheckSplitHoldsWindow(path, options.split, used.size, block));
  if (options.split != "test" && EvaluatesTestSplit(options)) {
    ASSIGN_OR_RETURN(TokenSplit test, TokenSplitRange(count, "test", options.val_fraction));
    Status status = CheckSplitHoldsWindow(path, "test", test.size, block);
    if (!status.ok()) {
      return InvalidArgumentError(status.message(),
                                  " (the evaluation reads it: set val_fraction or eval_batches "
                                  "to 0 for none)");
    }
  }
  return Status::OK();
}

}  // namespace

TokenWindowData TokenWindows(Graph* g, const std::string& path, int64_t batch, int64_t block,
                             int64_t vocab_size, const TokenWindowOptions& options) {
  if (!g->ok()) return {};
  Status status = CheckTokenWindowArgs(path, batch, block, vocab_size, options);
  StatusOr<int64_t> count = CountTokens(path, options.token_dtype);
  if (status.ok()) status = count.status();
  if (status.ok()) status = CheckTokenSplits(path, *count, block, options);
  if (!status.ok()) {
    g->RecordError(status.WithContext("TokenWindows"));
    return {};
  }
  // The evaluation job's iterations: eval_batches batches of windows of
  // the split it reads (eval_job.h).
  const int64_t eval_windows = options.eval_batches * batch;
  const int64_t seed = options.seed >= 0 ? options.seed : g->NextSeed();
  const std::string name = g->UniqueName("token_window", options.name);
  OpConf op = OpConfBuilder("token_window", name)
                  .Output("input")
                  .Output("target")
                  .Attr("path", path)
                  .Attr("split", options.split)
                  .Attr("batch_size", batch)
                  .Attr("block_size", block)
                  .Attr("vocab_size", vocab_size)
                  .Attr("token_dtype", options.token_dtype)
                  .Attr("val_fraction", options.val_fraction)
                  .Attr("eval_batches", options.eval_batches)
                  .Attr("seed", seed)
                  .Attr("count", eval_windows)
                  .Attr("test_count", EvaluatesTestSplit(options) ? eval_windows : int64_t{0})
                  .Build();
  // No epochs: the duration comes from Graph::SetIterations.
  Batch outputs = EmitSource(g, std::move(op), options.uneven_split, options.sbp, batch,
                             /*train_examples=*/0);
  return TokenWindowData{outputs.image, outputs.label};
}

Status CheckTokenWindows(const std::string& path, int64_t block, int64_t vocab_size,
                         const TokenWindowOptions& options) {
  RETURN_IF_ERROR(CheckTokenWindowArgs(path, 1, block, vocab_size, options));
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                   ReadTokenFile(path, options.token_dtype, vocab_size));
  return CheckTokenSplits(path, static_cast<int64_t>(tokens.size()), block, options);
}

}  // namespace oflite
