#include "oneflow_lite/data/npy_dataset.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "oneflow_lite/data/npy.h"

namespace oflite {
namespace {

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

template <typename T>
void Save(const std::string& path, DataType dtype, const std::vector<int64_t>& shape,
          const std::vector<T>& values) {
  ASSERT_TRUE(WriteNpy(path, dtype, shape, values.data()).ok()) << path;
}

std::string ErrorOf(const std::string& dir) {
  StatusOr<NpyDataset> loaded = LoadNpyDataset(dir, "train");
  return loaded.ok() ? "(loaded)" : loaded.status().message();
}

TEST(NpyDatasetTest, LoadsAndConvertsSizesOneAndOdd) {
  for (int64_t n : {1, 5}) {
    const std::string dir = FreshDir("ok" + std::to_string(n));
    std::vector<uint8_t> x(n * 2 * 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 7);
    std::vector<int64_t> y(n);
    for (int64_t i = 0; i < n; ++i) y[i] = (i * 3) % 4;
    Save(dir + "/train_x.npy", DT_UINT8, {n, 2, 3}, x);
    Save(dir + "/train_y.npy", DT_INT64, {n}, y);
    StatusOr<NpySplitInfo> info = ReadNpySplitInfo(dir, "train");
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->count, n);
    EXPECT_EQ(info->sample_shape, (std::vector<int64_t>{2, 3}));
    StatusOr<NpyDataset> data = LoadNpyDataset(dir, "train");
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_EQ(data->count, n);
    EXPECT_EQ(data->sample_size, 6);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(data->samples[i], static_cast<float>(x[i]));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(data->labels[i], y[i]);
  }
}

TEST(NpyDatasetTest, ZeroSamplesLoadEmpty) {
  const std::string dir = FreshDir("empty");
  Save(dir + "/train_x.npy", DT_FLOAT, {0, 4}, std::vector<float>{});
  Save(dir + "/train_y.npy", DT_INT32, {0}, std::vector<int32_t>{});
  StatusOr<NpyDataset> data = LoadNpyDataset(dir, "train");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->count, 0);
}

TEST(NpyDatasetTest, BadFilesAreNamed) {
  const std::string dir = FreshDir("bad");
  Save(dir + "/train_x.npy", DT_FLOAT, {3, 2}, std::vector<float>(6, 1));
  Save(dir + "/train_y.npy", DT_INT32, {2}, std::vector<int32_t>{0, 1});
  EXPECT_NE(ErrorOf(dir).find("train_x.npy' holds 3 samples but '" + dir +
                              "/train_y.npy' holds 2 labels"),
            std::string::npos)
      << ErrorOf(dir);
  Save(dir + "/train_y.npy", DT_FLOAT, {3}, std::vector<float>{0, 1, 2});
  EXPECT_NE(ErrorOf(dir).find("train_y.npy' holds float32 labels"), std::string::npos)
      << ErrorOf(dir);
  Save(dir + "/train_y.npy", DT_INT32, {3, 2}, std::vector<int32_t>(6, 0));
  EXPECT_NE(ErrorOf(dir).find("has shape (3, 2): want labels [N] or [N, 1]"), std::string::npos)
      << ErrorOf(dir);
  Save(dir + "/train_y.npy", DT_INT32, {3, 1}, std::vector<int32_t>{0, -4, 1});
  EXPECT_NE(ErrorOf(dir).find("label -4 at index 1"), std::string::npos) << ErrorOf(dir);
  // Truncated samples: the header check names the file without reading it.
  Save(dir + "/train_y.npy", DT_INT32, {3}, std::vector<int32_t>{0, 1, 2});
  std::ofstream(dir + "/train_x.npy", std::ios::app | std::ios::binary);  // unchanged
  {
    std::ifstream in(dir + "/train_x.npy", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir + "/train_x.npy", std::ios::binary) << bytes.substr(0, bytes.size() - 5);
  }
  StatusOr<NpySplitInfo> info = ReadNpySplitInfo(dir, "train");
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("train_x.npy': truncated"), std::string::npos)
      << info.status();
  EXPECT_NE(ErrorOf(dir).find("truncated"), std::string::npos) << ErrorOf(dir);
  const std::string missing = FreshDir("missing");
  EXPECT_NE(ErrorOf(missing).find(missing + "/train_x.npy"), std::string::npos) << ErrorOf(missing);
}

}  // namespace
}  // namespace oflite
