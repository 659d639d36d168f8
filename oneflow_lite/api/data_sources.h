// The data-source library: the ops that produce a model's batches
// (image, label) on a Graph (graph.h): Fashion-MNIST idx files, the user's
// .npy arrays, deterministic random batches, windows of a token file
// (TokenWindows, for language models); and HostInput, tensors the program
// pushes while the plan runs.
//
//   oflite::Graph g("mlp", /*seed=*/1);
//   oflite::Batch data = oflite::FashionMnist(&g, "/usr/share/datasets/fashion-mnist",
//                                             /*batch_size=*/64, oflite::Split(0));
//
// Each source is one op named from its kind ("fashion_mnist", ...) or
// options.name, seeded with the graph's next seed (shuffling), hinting
// `sbp` on both outputs (Split(0): each device takes its rows of every
// batch, i.e. data parallel). It tells the graph its batch size (the Job's
// batch_size is the first source's) and, for a training split, its number
// of examples, so that Graph::SetEpochs (and the default of one epoch)
// know an epoch's iterations (Graph::RecordDataSource). `batch_size` is the
// logical (global) batch.
//
// Errors are the graph's: a bad argument or a missing file records one
// naming the source and the file; after any error a source adds nothing
// and returns an invalid Batch. `g` must not be null; it is used during the
// call only. Thread-compatible, like the Graph.
#ifndef ONEFLOW_LITE_API_DATA_SOURCES_H_
#define ONEFLOW_LITE_API_DATA_SOURCES_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "oneflow_lite/api/graph.h"
// The character tokenizer of text corpora (CharTokenizer, PrepareCorpus,
// DefaultCorpusFiles) is part of this public surface: a program prepares
// tokens.npy/vocab.txt for TokenWindows and decodes what a model generates.
#include "oneflow_lite/data/char_tokenizer.h"
#include "oneflow_lite/data/host_feed.h"

namespace oflite {

// Fashion-MNIST sizes (the train and test splits of the idx files).
inline constexpr int64_t kFashionMnistTrainSize = 60000;
inline constexpr int64_t kFashionMnistTestSize = 10000;

struct Batch {
  Tensor image;  // float32 [B, 1, 28, 28] or [B, 784] when flattened
  Tensor label;  // int32 [B]
};

struct FashionMnistOptions {
  std::string split = "train";  // "train" or "test"
  bool shuffle = true;
  bool flatten = false;  // image [B, 784] instead of [B, 1, 28, 28]
  double mean = 0.0;     // image = (pixel / 255 - mean) / std
  double std = 1.0;
  // Check at build time that the split's idx files exist under the path
  // (the kernel checks again when it starts).
  bool check_path = true;
  // Split a batch the devices do not divide into balanced parts (device k
  // gets batch / p rows, plus one if k < batch % p) instead of refusing it;
  // results equal one device (the loss and metrics average the gathered
  // batch).
  bool uneven_split = false;
  std::string name;
};

struct NpyDataOptions {
  std::string split = "train";  // "train" or "test"
  bool shuffle = true;          // per epoch, by the job seed
  // image = (x * scale - mean) / std, as float32 (x of any numeric dtype).
  double scale = 1.0;
  double mean = 0.0;
  double std = 1.0;
  bool uneven_split = false;  // as FashionMnistOptions::uneven_split
  std::string name;
};

// The idx files under `path` (train-images-idx3-ubyte[.gz], ... or t10k-*
// for the test split).
Batch FashionMnist(Graph* g, const std::string& path, int64_t batch_size,
                   const SbpParallel& sbp = Split(0), const FashionMnistOptions& options = {});

// Batches of the user's arrays: <dir>/train_x.npy (samples [N, ...], any
// numeric dtype) and train_y.npy (integer labels [N]), plus test_x.npy /
// test_y.npy for the evaluation plan when present (data/npy_dataset.h).
// The headers are read now (sample shape and count; a bad file is the
// graph's error, naming it); the data is read by the kernel on every
// machine, each device taking its rows of each batch. image: float32
// [B, sample dims...]; label: int32 [B]. Epochs count the train split.
Batch NpyData(Graph* g, const std::string& dir, int64_t batch_size,
              const SbpParallel& sbp = Split(0), const NpyDataOptions& options = {});

// Deterministic synthetic data: image `dtype` (float32 or float64) of
// `image_shape` ([B, ...]), label int32 [B] in [0, num_classes). Endless:
// it sets no epoch length.
Batch RandomBatch(Graph* g, const Shape& image_shape, int64_t num_classes,
                  const SbpParallel& sbp = Split(0), DataType dtype = DT_FLOAT,
                  const std::string& name = "");

// A tensor the program streams in while the plan runs: at each iteration
// the next HostTensor pushed with HostFeed::Push(feed, tensor)
// (data/host_feed.h, included here), of exactly `shape` and `dtype`
// (int32, int64, float32 or float64; anything else fails the run naming
// the op, the feed and both descs). An op `host_feed` named `name` (empty:
// "host_feed", "host_feed_1", ...). A wait longer than `timeout` fails the
// run naming the op, the feed and the iteration. It runs on one device
// (broadcast; a placement of several devices is refused when the plan
// starts) and tells the graph a batch of shape[0] (1 for a scalar). Use it
// in inference graphs run by driver::RunInference (tools/driver/trainer.h).
Tensor HostInput(Graph* g, const std::string& feed, const Shape& shape, DataType dtype,
                 const std::string& name = "",
                 std::chrono::milliseconds timeout = kDefaultHostFeedTimeout);

// ---- Token windows (language models) ----------------------------------------

struct TokenWindowData {
  Tensor input;   // int32 [B, T]: B windows of T token ids
  Tensor target;  // int32 [B, T]: each input position's next token
};

struct TokenWindowOptions {
  std::string split = "train";  // "train" or "test"
  // Id type of a raw token file (any name but *.npy): "uint16" or "int32".
  // A .npy file's header says its own (uint16, int32 or int64).
  std::string token_dtype = "uint16";
  // The test split is the last val_fraction of the tokens, the train split
  // the rest (nanoGPT's 90/10); 0: no test split.
  double val_fraction = 0.1;
  // The evaluation after training (MakeEvalJob, oflite run) reports the
  // loss over eval_batches batches of test windows (0: no evaluation).
  int64_t eval_batches = 20;
  int64_t seed = -1;  // >= 0: the windows' seed; -1: the graph's next seed
  SbpParallel sbp = Split(0);  // hinted on both outputs
  bool uneven_split = false;   // as FashionMnistOptions::uneven_split
  std::string name;
};

// Seeded random windows of the token file `path` (data/token_file.h: a 1-D
// .npy of uint16/int32/int64 ids, e.g. PrepareCorpus's tokens.npy of
// data/char_tokenizer.h, or raw little-endian ids): an op `token_window`.
// Row g of iteration t is the window of `block` tokens starting at
// TokenWindowStart(seed, t, g, n, block) of the split's n tokens, uniform
// in [0, n - block - 1], and its target the window one token later; a
// batch depends only on (seed, t, g), the same on every machine and after
// a resume, and the shards of a data-parallel run are the 1-device batch.
// Every id must be < vocab_size.
//
// The token count is read now (the .npy header or the file's size): a
// missing or corrupt file, or a split shorter than block + 1 tokens (the
// used split, and the test split when evaluation is on), is the graph's
// error naming the file, the split, its token count and the block. The ids
// are checked by the kernel when the plan starts; CheckTokenWindows checks
// them now. There are no epochs: the graph records the batch with no
// training examples, so set the duration with Graph::SetIterations.
TokenWindowData TokenWindows(Graph* g, const std::string& path, int64_t batch, int64_t block,
                             int64_t vocab_size, const TokenWindowOptions& options = {});

// What a program checks before it builds and compiles a TokenWindows job,
// to exit with a usage error (exit 2) on bad input: the file reads, every
// id is in [0, vocab_size) (else InvalidArgument naming the file and the
// id's position), and the train split, plus the test split when
// options.val_fraction > 0 and options.eval_batches > 0, hold block + 1
// tokens. Reads the whole file.
Status CheckTokenWindows(const std::string& path, int64_t block, int64_t vocab_size,
                         const TokenWindowOptions& options = {});

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_DATA_SOURCES_H_
