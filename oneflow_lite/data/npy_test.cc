#include "oneflow_lite/data/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace oflite {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// A .npy file with the given dict and `data_bytes` zero data bytes.
std::string NpyBytes(const std::string& dict, size_t data_bytes, char version = 1) {
  std::string header = dict + "\n";
  std::string bytes("\x93NUMPY", 6);
  bytes += version;
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  if (version != 1) bytes += std::string(2, '\0');
  return bytes + header + std::string(data_bytes, '\0');
}

TEST(NpyTest, RoundTripsSizesZeroOneAndOdd) {
  for (int64_t rows : {0, 1, 7}) {
    std::vector<float> values(rows * 3);
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * i - 1;
    const std::string path = TempPath("round" + std::to_string(rows) + ".npy");
    ASSERT_TRUE(WriteNpy(path, DT_FLOAT, {rows, 3}, values.data()).ok());
    const std::string bytes = ReadAll(path);
    // The data starts at a multiple of 64 bytes, as numpy requires.
    EXPECT_EQ((bytes.size() - values.size() * sizeof(float)) % 64, 0u);
    StatusOr<NpyArray> read = ReadNpy(path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->dtype, DT_FLOAT);
    EXPECT_EQ(read->shape, (std::vector<int64_t>{rows, 3}));
    ASSERT_EQ(read->elem_count(), rows * 3);
    for (int64_t i = 0; i < rows * 3; ++i) EXPECT_EQ(read->values<float>()[i], values[i]);
  }
}

TEST(NpyTest, EveryDtypeAndOneDimensionalShapes) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_INT8, DT_UINT8, DT_BOOL}) {
    std::vector<char> data(5 * 8, 1);
    const std::string path = TempPath("dtype.npy");
    ASSERT_TRUE(WriteNpy(path, dtype, {5}, data.data()).ok());
    StatusOr<NpyArray> read = ReadNpy(path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->dtype, dtype);
    EXPECT_EQ(read->shape, std::vector<int64_t>{5});
  }
  StatusOr<std::string> dict = NpyHeaderDict(DT_INT64, {5});
  ASSERT_TRUE(dict.ok());
  EXPECT_NE(dict->find("'shape': (5,)"), std::string::npos) << *dict;
}

TEST(NpyTest, AcceptsVersionTwoAndDoubleQuotes) {
  StatusOr<NpyArray> read = ParseNpy(
      NpyBytes("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2, 1), }", 8, 2), "x");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->dtype, DT_INT32);
  EXPECT_EQ(read->shape, (std::vector<int64_t>{2, 1}));
}

TEST(NpyTest, ErrorsNameTheFileAndTheProblem) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }";
  struct Case {
    std::string bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"PK\x03\x04 not numpy", "not a .npy file"},
      {NpyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (4, 2), }", 32),
       "dtype '>f4' is not supported"},
      {NpyBytes("{'descr': '<c8', 'fortran_order': False, 'shape': (4, 2), }", 64),
       "dtype '<c8' is not supported"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (4, 2), }", 32), "Fortran-order"},
      {NpyBytes(ok, 31), "truncated: holds 31 of the 32 data bytes its header (4, 2) float32"},
      {NpyBytes(ok, 33), "1 bytes after the data"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, }", 32), "has no 'shape'"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4, x), }", 32),
       "bad dimension"},
      {NpyBytes(ok, 32).substr(0, 20), "truncated .npy header"},
  };
  for (const Case& c : cases) {
    StatusOr<NpyArray> read = ParseNpy(c.bytes, "'images.npy'");
    ASSERT_FALSE(read.ok()) << c.expected;
    EXPECT_NE(read.status().message().find("'images.npy'"), std::string::npos) << read.status();
    EXPECT_NE(read.status().message().find(c.expected), std::string::npos) << read.status();
  }
  StatusOr<NpyArray> missing = ReadNpy("/nonexistent/labels.npy");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/labels.npy"), std::string::npos);
}

TEST(NpyTest, Uint16RoundTripsAndOnlyItsOwnReaderAcceptsIt) {
  for (int64_t count : {0, 1, 7}) {
    std::vector<uint16_t> values(count);
    for (int64_t i = 0; i < count; ++i) values[i] = static_cast<uint16_t>(65535 - 1000 * i);
    const std::string path = TempPath("tokens" + std::to_string(count) + ".npy");
    ASSERT_TRUE(WriteNpyUint16(path, {count}, values.data()).ok());
    EXPECT_NE(ReadAll(path).find("'descr': '<u2'"), std::string::npos);
    StatusOr<NpyUint16Array> read = ReadNpyUint16(path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->shape, std::vector<int64_t>{count});
    EXPECT_EQ(read->values, values);
    StatusOr<std::string> type = ReadNpyElementType(path);
    ASSERT_TRUE(type.ok()) << type.status();
    EXPECT_EQ(*type, "uint16");
    StatusOr<NpyArray> refused = ReadNpy(path);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("dtype '<u2' is not supported"), std::string::npos)
        << refused.status();
  }
  const std::string ints = TempPath("ints.npy");
  const int32_t data[2] = {1, 2};
  ASSERT_TRUE(WriteNpy(ints, DT_INT32, {2}, data).ok());
  EXPECT_EQ(*ReadNpyElementType(ints), "int32");
  StatusOr<NpyUint16Array> wrong = ReadNpyUint16(ints);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("holds int32, not uint16"), std::string::npos)
      << wrong.status();
  // A truncated uint16 file names the element type.
  const std::string full = ReadAll(TempPath("tokens7.npy"));
  const std::string cut = TempPath("cut.npy");
  std::ofstream(cut, std::ios::binary) << full.substr(0, full.size() - 3);
  StatusOr<NpyUint16Array> truncated = ReadNpyUint16(cut);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("holds 11 of the 14 data bytes its header (7,) uint16"),
            std::string::npos)
      << truncated.status();
}

}  // namespace
}  // namespace oflite
