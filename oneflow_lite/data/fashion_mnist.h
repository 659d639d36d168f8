// Fashion-MNIST (and MNIST, same layout) loading and epoch ordering.
//
// A split is a pair of idx files in one directory:
//   train: train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz (60000)
//   test:  t10k-images-idx3-ubyte.gz,  t10k-labels-idx1-ubyte.gz  (10000)
// (an uncompressed file without ".gz" is used when only it exists).
// LoadImageDataset reads both (idx_reader.h), checks that the images are
// [N, rows, cols], the labels [N] with the same N, and every label below
// kFashionMnistClasses; errors name the offending file.
//
// EpochOrder gives the sample order of an epoch: the identity, or a
// Fisher-Yates permutation drawn from CounterRng(DeriveStreamSeed(seed, epoch)), so
// every machine computes the same order without communicating.
//
// Thread-safe free functions; results owned by the caller.
#ifndef ONEFLOW_LITE_DATA_FASHION_MNIST_H_
#define ONEFLOW_LITE_DATA_FASHION_MNIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {

inline constexpr char kFashionMnistDefaultDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr int kFashionMnistClasses = 10;

struct ImageDataset {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> images;  // count * rows * cols pixels, row-major
  std::vector<uint8_t> labels;  // count labels in [0, kFashionMnistClasses)

  const uint8_t* Image(int64_t index) const { return images.data() + index * rows * cols; }
};

// The file names of a split ("train" or "test"); InvalidArgument otherwise.
struct SplitFiles {
  std::string images;
  std::string labels;
};
StatusOr<SplitFiles> FashionMnistFiles(const std::string& dir, const std::string& split);

// Loads the images and labels of `split` from `dir`.
StatusOr<ImageDataset> LoadFashionMnist(const std::string& dir, const std::string& split);

// Loads a dataset from an explicit pair of idx files.
StatusOr<ImageDataset> LoadImageDataset(const std::string& images_path,
                                        const std::string& labels_path);

// The order in which epoch `epoch` visits samples 0..count-1.
std::vector<int64_t> EpochOrder(int64_t count, bool shuffle, uint64_t seed, int64_t epoch);

}  // namespace oflite

#endif  // ONEFLOW_LITE_DATA_FASHION_MNIST_H_
