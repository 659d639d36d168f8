// The data-source library: the ops that produce a model's batches
// (image, label) on a Graph (graph.h): Fashion-MNIST idx files, the user's
// .npy arrays, deterministic random batches.
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

#include <cstdint>
#include <string>

#include "oneflow_lite/api/graph.h"

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

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_DATA_SOURCES_H_
