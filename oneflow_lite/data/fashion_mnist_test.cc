// Loads the real Fashion-MNIST (Debian dataset-fashion-mnist) and checks
// known facts about it, plus the epoch ordering.
#include "oneflow_lite/data/fashion_mnist.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <vector>

namespace oflite {
namespace {

std::vector<int64_t> ClassCounts(const ImageDataset& dataset) {
  std::vector<int64_t> counts(kFashionMnistClasses, 0);
  for (uint8_t label : dataset.labels) ++counts[label];
  return counts;
}

TEST(FashionMnistTest, TrainSplit) {
  StatusOr<ImageDataset> train = LoadFashionMnist(kFashionMnistDefaultDir, "train");
  ASSERT_TRUE(train.ok()) << train.status() << " (install dataset-fashion-mnist)";
  EXPECT_EQ(train->count, 60000);
  EXPECT_EQ(train->rows, 28);
  EXPECT_EQ(train->cols, 28);
  EXPECT_EQ(ClassCounts(*train), std::vector<int64_t>(10, 6000));
  // Sample 0 is an ankle boot (class 9).
  EXPECT_EQ(train->labels[0], 9);
  EXPECT_EQ(train->labels[1], 0);
  EXPECT_EQ(train->labels[59999], 5);
  const uint8_t* image = train->Image(0);
  EXPECT_EQ(std::accumulate(image, image + 784, 0), 76247);
  EXPECT_EQ(image[95], 0);
  EXPECT_EQ(image[96], 1);
  EXPECT_EQ(image[99], 13);
  EXPECT_EQ(image[14 * 28 + 14], 217);
}

TEST(FashionMnistTest, TestSplit) {
  StatusOr<ImageDataset> test =
      LoadFashionMnist(std::string(kFashionMnistDefaultDir) + "/", "test");
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->count, 10000);
  EXPECT_EQ(ClassCounts(*test), std::vector<int64_t>(10, 1000));
  EXPECT_EQ(test->labels[0], 9);
  EXPECT_EQ(test->labels[1], 2);
  const uint8_t* image = test->Image(0);
  EXPECT_EQ(std::accumulate(image, image + 784, 0), 33456);
  EXPECT_EQ(image[14 * 28 + 14], 110);
}

TEST(FashionMnistTest, ErrorsNameTheFile) {
  StatusOr<ImageDataset> missing = LoadFashionMnist("/nonexistent/fmnist", "train");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/fmnist/train-images-idx3-ubyte.gz"),
            std::string::npos)
      << missing.status();
  StatusOr<ImageDataset> bad_split = LoadFashionMnist(kFashionMnistDefaultDir, "validation");
  ASSERT_FALSE(bad_split.ok());
  EXPECT_NE(bad_split.status().message().find("validation"), std::string::npos);
  // Images where labels are expected: wrong rank, named.
  const std::string images = std::string(kFashionMnistDefaultDir) + "/t10k-images-idx3-ubyte.gz";
  StatusOr<ImageDataset> swapped = LoadImageDataset(images, images);
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.status().message().find("labels must have 1 dimension"), std::string::npos);
}

// A tiny uncompressed test split: 3 images of 2x2 and their labels.
std::string WriteTinySplit(const std::string& name, uint8_t last_label) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  mkdir(dir.c_str(), 0755);
  const std::string images = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2,  0,  0,
                              0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::string labels = {0, 0, 8, 1, 0, 0, 0, 3, 4, 0, static_cast<char>(last_label)};
  std::ofstream(dir + "/t10k-images-idx3-ubyte", std::ios::binary) << images;
  std::ofstream(dir + "/t10k-labels-idx1-ubyte", std::ios::binary) << labels;
  return dir;
}

TEST(FashionMnistTest, UncompressedFilesAndLabelRange) {
  StatusOr<ImageDataset> tiny = LoadFashionMnist(WriteTinySplit("tiny", 9), "test");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(tiny->count, 3);
  EXPECT_EQ(tiny->rows, 2);
  EXPECT_EQ(tiny->Image(2)[3], 12);
  EXPECT_EQ(tiny->labels, (std::vector<uint8_t>{4, 0, 9}));
  const std::string bad_dir = WriteTinySplit("bad_label", 10);
  StatusOr<ImageDataset> bad = LoadFashionMnist(bad_dir, "test");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(bad_dir + "/t10k-labels-idx1-ubyte"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("label 10 of sample 2"), std::string::npos) << bad.status();
}

TEST(EpochOrderTest, ShuffleIsASeededPermutation) {
  const std::vector<int64_t> identity = EpochOrder(10, false, 1, 3);
  EXPECT_EQ(identity, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const std::vector<int64_t> a = EpochOrder(1000, true, 42, 0);
  EXPECT_EQ(a, EpochOrder(1000, true, 42, 0));  // same seed and epoch: same order
  EXPECT_NE(a, EpochOrder(1000, true, 42, 1));  // next epoch: new order
  EXPECT_NE(a, EpochOrder(1000, true, 43, 0));  // other seed: new order
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, EpochOrder(1000, false, 0, 0));
  EXPECT_NE(a, sorted);
  EXPECT_TRUE(EpochOrder(0, true, 1, 0).empty());
  EXPECT_EQ(EpochOrder(1, true, 1, 0), std::vector<int64_t>{0});
}

}  // namespace
}  // namespace oflite
