// idx parsing and validation, on small fixture files written to TEST_TMPDIR.
#include "oneflow_lite/data/idx_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace oflite {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// An idx header for unsigned bytes with `dims`, followed by `data`.
std::string IdxBytes(const std::vector<uint32_t>& dims, const std::string& data,
                     uint8_t type = 0x08) {
  std::string bytes = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
  }
  return bytes + data;
}

std::string WritePlain(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string WriteGzip(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  gzFile file = gzopen(path.c_str(), "wb");
  EXPECT_NE(file, nullptr);
  EXPECT_EQ(gzwrite(file, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  EXPECT_EQ(gzclose(file), Z_OK);
  return path;
}

void ExpectError(const StatusOr<IdxArray>& result, StatusCode code, const std::string& path,
                 const std::string& fragment) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_NE(result.status().message().find(path), std::string::npos) << result.status();
  EXPECT_NE(result.status().message().find(fragment), std::string::npos) << result.status();
}

TEST(IdxReaderTest, ReadsGzipAndPlainFiles) {
  const std::string data = {1, 2, 3, 4, 5, static_cast<char>(255)};
  for (const std::string& path :
       {WriteGzip("ok.gz", IdxBytes({2, 3}, data)), WritePlain("ok.idx", IdxBytes({2, 3}, data))}) {
    StatusOr<IdxArray> array = ReadIdxFile(path);
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_EQ(array->dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(array->data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 255}));
  }
  StatusOr<IdxArray> one = ReadIdxFile(WriteGzip("one.gz", IdxBytes({1}, std::string(1, 7))));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->data, std::vector<uint8_t>{7});
}

TEST(IdxReaderTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = TempPath("does-not-exist-idx1-ubyte.gz");
  ExpectError(ReadIdxFile(path), StatusCode::kNotFound, path, "No such file");
}

TEST(IdxReaderTest, WrongMagicIsRejected) {
  const std::string path = WriteGzip("magic.gz", "\x12\x34\x08\x01" + std::string(4, '\0'));
  ExpectError(ReadIdxFile(path), StatusCode::kInvalidArgument, path, "bad magic number 0x12340801");
  const std::string tiny = WriteGzip("tiny.gz", std::string(2, '\0'));
  ExpectError(ReadIdxFile(tiny), StatusCode::kInvalidArgument, tiny, "4-byte magic");
}

TEST(IdxReaderTest, TruncatedOrOversizedDataIsRejected) {
  const std::string truncated = WriteGzip("truncated.gz", IdxBytes({2, 3}, "abcde"));
  ExpectError(ReadIdxFile(truncated), StatusCode::kDataLoss, truncated,
              "declares 6 bytes of data, file has 5 (truncated)");
  const std::string trailing = WriteGzip("trailing.gz", IdxBytes({2}, "abc"));
  ExpectError(ReadIdxFile(trailing), StatusCode::kDataLoss, trailing, "trailing bytes");
  const std::string header = WriteGzip("header.gz", IdxBytes({2, 3}, "").substr(0, 9));
  ExpectError(ReadIdxFile(header), StatusCode::kDataLoss, header, "inside its header");
}

TEST(IdxReaderTest, BadHeadersAreRejected) {
  const std::string zero_dim = WriteGzip("zero.gz", IdxBytes({2, 0}, ""));
  ExpectError(ReadIdxFile(zero_dim), StatusCode::kInvalidArgument, zero_dim, "dimension 1 is 0");
  const std::string no_dims = WriteGzip("nodims.gz", IdxBytes({}, ""));
  ExpectError(ReadIdxFile(no_dims), StatusCode::kInvalidArgument, no_dims, "0 dimensions");
  const std::string floats = WriteGzip("float.gz", IdxBytes({1}, "abcd", 0x0D));
  ExpectError(ReadIdxFile(floats), StatusCode::kUnimplemented, floats, "0xd");
}

TEST(IdxReaderTest, TruncatedGzipStreamIsDataLoss) {
  std::string payload;
  for (int i = 0; i < 5000; ++i) payload.push_back(static_cast<char>((i * 7919) % 251));
  const std::string whole = WriteGzip("whole.gz", IdxBytes({5000}, payload));
  std::ifstream in(whole, std::ios::binary);
  std::string compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(compressed.size(), 100u);
  const std::string cut = WritePlain("cut.gz", compressed.substr(0, compressed.size() / 2));
  ExpectError(ReadIdxFile(cut), StatusCode::kDataLoss, cut, "");
  std::string corrupt = compressed;
  corrupt[corrupt.size() - 6] ^= 0x5A;  // inside the CRC32 trailer
  const std::string bad_crc = WritePlain("crc.gz", corrupt);
  ExpectError(ReadIdxFile(bad_crc), StatusCode::kDataLoss, bad_crc, "");
}

}  // namespace
}  // namespace oflite
