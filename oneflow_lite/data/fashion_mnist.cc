#include "oneflow_lite/data/fashion_mnist.h"

#include <sys/stat.h>

#include <numeric>
#include <utility>

#include "oneflow_lite/data/counter_rng.h"
#include "oneflow_lite/data/idx_reader.h"

namespace oflite {
namespace {

// "<stem>.gz" unless only the uncompressed "<stem>" exists.
std::string PreferGzip(const std::string& stem) {
  struct stat info;
  const std::string gzip = stem + ".gz";
  if (stat(gzip.c_str(), &info) != 0 && stat(stem.c_str(), &info) == 0) return stem;
  return gzip;
}

}  // namespace

StatusOr<SplitFiles> FashionMnistFiles(const std::string& dir, const std::string& split) {
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    return InvalidArgumentError("unknown Fashion-MNIST split '", split,
                                "' (expected train or test)");
  }
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  return SplitFiles{PreferGzip(base + prefix + "-images-idx3-ubyte"),
                    PreferGzip(base + prefix + "-labels-idx1-ubyte")};
}

StatusOr<ImageDataset> LoadImageDataset(const std::string& images_path,
                                        const std::string& labels_path) {
  ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  if (images.dims.size() != 3) {
    return InvalidArgumentError("'", images_path,
                                "': images must have 3 dimensions [N, rows, cols], got ",
                                images.dims.size());
  }
  if (labels.dims.size() != 1) {
    return InvalidArgumentError("'", labels_path, "': labels must have 1 dimension, got ",
                                labels.dims.size());
  }
  if (labels.dims[0] != images.dims[0]) {
    return InvalidArgumentError("'", labels_path, "' has ", labels.dims[0], " labels but '",
                                images_path, "' has ", images.dims[0], " images");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kFashionMnistClasses) {
      return InvalidArgumentError("'", labels_path, "': label ", int{labels.data[i]}, " of sample ",
                                  i, " is not below ", kFashionMnistClasses);
    }
  }
  ImageDataset dataset;
  dataset.count = images.dims[0];
  dataset.rows = images.dims[1];
  dataset.cols = images.dims[2];
  dataset.images = std::move(images.data);
  dataset.labels = std::move(labels.data);
  return dataset;
}

StatusOr<ImageDataset> LoadFashionMnist(const std::string& dir, const std::string& split) {
  ASSIGN_OR_RETURN(SplitFiles files, FashionMnistFiles(dir, split));
  return LoadImageDataset(files.images, files.labels);
}

std::vector<int64_t> EpochOrder(int64_t count, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(count);
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  CounterRng rng(DeriveStreamSeed(seed, static_cast<uint64_t>(epoch)));
  for (int64_t i = count - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng.NextBelow(static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace oflite
