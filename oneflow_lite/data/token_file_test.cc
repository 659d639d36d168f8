#include "oneflow_lite/data/token_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "oneflow_lite/data/counter_rng.h"
#include "oneflow_lite/data/npy.h"

namespace oflite {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteBytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// Expects `status` to fail and its message to contain every piece.
void ExpectError(const Status& status, const std::vector<std::string>& pieces) {
  ASSERT_FALSE(status.ok()) << pieces.front();
  for (const std::string& piece : pieces) {
    EXPECT_NE(status.message().find(piece), std::string::npos)
        << "'" << piece << "' not in: " << status;
  }
}

TEST(TokenSplitTest, TrainIsTheFirstFractionTestTheRest) {
  struct Case {
    int64_t count;
    double val_fraction;
    int64_t train;
  };
  // int(count * (1 - val_fraction)), as nanoGPT's prepare scripts compute.
  for (const Case& c :
       {Case{100, 0.1, 90}, Case{0, 0.1, 0}, Case{1, 0.1, 0}, Case{7, 0.1, 6},
        Case{1000003, 0.1, 900002}, Case{10, 0.0, 10}, Case{10, 0.5, 5}, Case{9, 0.25, 6}}) {
    StatusOr<TokenSplit> train = TokenSplitRange(c.count, "train", c.val_fraction);
    StatusOr<TokenSplit> test = TokenSplitRange(c.count, "test", c.val_fraction);
    ASSERT_TRUE(train.ok() && test.ok()) << train.status() << test.status();
    EXPECT_EQ(train->begin, 0);
    EXPECT_EQ(train->size, c.train) << c.count << " " << c.val_fraction;
    EXPECT_EQ(test->begin, c.train);
    EXPECT_EQ(test->size, c.count - c.train);
  }
  ExpectError(TokenSplitRange(10, "dev", 0.1).status(), {"\"dev\""});
  ExpectError(TokenSplitRange(10, "train", 1.0).status(), {"val_fraction", "[0, 1)"});
  ExpectError(TokenSplitRange(10, "train", -0.1).status(), {"val_fraction"});
}

TEST(TokenFileTest, EveryFormatReadsTheSameIds) {
  const std::vector<int32_t> expected = {0, 5, 64, 3, 3, 1, 0};
  const std::vector<uint16_t> u16(expected.begin(), expected.end());
  const std::vector<int64_t> i64(expected.begin(), expected.end());
  const std::string npy16 = TempPath("ids16.npy"), npy32 = TempPath("ids32.npy"),
                    npy64 = TempPath("ids64.npy"), bin16 = TempPath("ids16.bin"),
                    bin32 = TempPath("ids32.bin");
  ASSERT_TRUE(WriteNpyUint16(npy16, {7}, u16.data()).ok());
  ASSERT_TRUE(WriteNpy(npy32, DT_INT32, {7}, expected.data()).ok());
  ASSERT_TRUE(WriteNpy(npy64, DT_INT64, {7}, i64.data()).ok());
  WriteBytes(bin16, u16.data(), u16.size() * 2);
  WriteBytes(bin32, expected.data(), expected.size() * 4);
  struct Case {
    std::string path;
    std::string dtype;
  };
  // A .npy file's header decides; token_dtype only types raw files.
  for (const Case& c : {Case{npy16, "int32"}, Case{npy32, "uint16"}, Case{npy64, ""},
                        Case{bin16, "uint16"}, Case{bin32, "int32"}}) {
    StatusOr<std::vector<int32_t>> ids = ReadTokenFile(c.path, c.dtype, 65);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, expected) << c.path;
    StatusOr<int64_t> count = CountTokens(c.path, c.dtype);
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_EQ(*count, 7) << c.path;
  }
  // Sizes 0 and 1.
  for (int64_t n : {0, 1}) {
    const std::string path = TempPath("small" + std::to_string(n) + ".npy");
    ASSERT_TRUE(WriteNpyUint16(path, {n}, u16.data()).ok());
    StatusOr<std::vector<int32_t>> ids = ReadTokenFile(path, "uint16", 1);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(ids->size(), static_cast<size_t>(n));
  }
}

TEST(TokenFileTest, AnIdOutsideTheVocabularyNamesTheFileAndPosition) {
  const std::vector<int32_t> ids = {1, 2, 3, 70, 4};
  const std::vector<uint16_t> u16(ids.begin(), ids.end());
  const std::vector<int64_t> i64 = {1, 2, 3, 4, -1};
  const std::string npy16 = TempPath("bad16.npy"), npy32 = TempPath("bad32.npy"),
                    npy64 = TempPath("bad64.npy"), bin16 = TempPath("bad16.bin");
  ASSERT_TRUE(WriteNpyUint16(npy16, {5}, u16.data()).ok());
  ASSERT_TRUE(WriteNpy(npy32, DT_INT32, {5}, ids.data()).ok());
  ASSERT_TRUE(WriteNpy(npy64, DT_INT64, {5}, i64.data()).ok());
  WriteBytes(bin16, u16.data(), u16.size() * 2);
  for (const std::string& path : {npy16, npy32, bin16}) {
    ExpectError(ReadTokenFile(path, "uint16", 65).status(),
                {"'" + path + "'", "token 70 at position 3", "vocabulary [0, 65)"});
    ExpectError(CheckTokenFile(path, "uint16", 65, 2), {"'" + path + "'", "position 3"});
  }
  ExpectError(ReadTokenFile(npy64, "", 65).status(), {"'" + npy64 + "'", "token -1 at position 4"});
  ExpectError(ReadTokenFile(npy32, "", 0).status(), {npy32, "vocab_size"});
}

TEST(TokenFileTest, MissingCorruptAndMistypedFilesAreNamed) {
  for (const std::string& path :
       {std::string("/nonexistent/tokens.npy"), std::string("/nonexistent/train.bin")}) {
    StatusOr<std::vector<int32_t>> read = ReadTokenFile(path, "uint16", 10);
    ExpectError(read.status(), {path});
    EXPECT_EQ(read.status().code(), StatusCode::kNotFound) << read.status();
    ExpectError(CountTokens(path, "uint16").status(), {path});
  }
  // A raw file whose size is not a multiple of the id size.
  const std::string odd = TempPath("odd.bin");
  WriteBytes(odd, "abcde", 5);
  ExpectError(ReadTokenFile(odd, "uint16", 300).status(),
              {"'" + odd + "'", "5 bytes, not a multiple of 2"});
  ExpectError(ReadTokenFile(odd, "int16", 300).status(), {"'" + odd + "'", "token_dtype"});
  // A truncated .npy.
  const std::vector<uint16_t> ids(10, 1);
  const std::string full = TempPath("full.npy"), cut = TempPath("cut.npy");
  ASSERT_TRUE(WriteNpyUint16(full, {10}, ids.data()).ok());
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  WriteBytes(cut, bytes.data(), bytes.size() - 1);
  ExpectError(ReadTokenFile(cut, "", 10).status(), {"'" + cut + "'", "truncated"});
  ExpectError(CountTokens(cut, "").status(), {"'" + cut + "'", "truncated"});
  // Not token ids: floats, or a 2-D array.
  const float floats[4] = {0, 1, 2, 3};
  const std::string fnpy = TempPath("floats.npy"), matrix = TempPath("matrix.npy");
  ASSERT_TRUE(WriteNpy(fnpy, DT_FLOAT, {4}, floats).ok());
  ExpectError(ReadTokenFile(fnpy, "", 10).status(), {"'" + fnpy + "'", "holds float32"});
  ASSERT_TRUE(WriteNpyUint16(matrix, {2, 5}, ids.data()).ok());
  ExpectError(ReadTokenFile(matrix, "", 10).status(), {"'" + matrix + "'", "2-D"});
}

TEST(TokenFileTest, CheckTokenFileNeedsOneWindowInEachUsedSplit) {
  std::vector<uint16_t> ids(100);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>(i % 7);
  const std::string path = TempPath("hundred.npy");
  ASSERT_TRUE(WriteNpyUint16(path, {100}, ids.data()).ok());
  EXPECT_TRUE(CheckTokenFile(path, "", 7, 9, 0.1).ok());  // test: 10 tokens = 9 + 1
  ExpectError(CheckTokenFile(path, "", 7, 10, 0.1),
              {"test split", "'" + path + "'", "holds 10 tokens", "block_size 10"});
  ExpectError(CheckTokenFile(path, "", 7, 90, 0.1),
              {"train split", "'" + path + "'", "holds 90 tokens", "block_size 90"});
  EXPECT_TRUE(CheckTokenFile(path, "", 7, 99, 0.0).ok());  // no test split to check
  ExpectError(CheckTokenFile(path, "", 7, 100, 0.0), {"train split", "holds 100 tokens"});
  ExpectError(CheckTokenFile(path, "", 7, 0, 0.1), {"'" + path + "'", "block_size"});
  ExpectError(CheckTokenFile(path, "", 6, 4, 0.1),
              {"'" + path + "'", "token 6 at position 6", "[0, 6)"});
}

TEST(TokenWindowStartTest, UniformInRangeAndAFunctionOfItsArguments) {
  for (int64_t size : {2, 3, 11, 1000}) {
    const int64_t block = 1;
    std::set<int64_t> seen;
    for (int64_t t = 0; t < 200; ++t) {
      for (int64_t row = 0; row < 5; ++row) {
        const int64_t start = TokenWindowStart(42, t, row, size, block);
        ASSERT_GE(start, 0);
        ASSERT_LE(start, size - block - 1);
        EXPECT_EQ(start, TokenWindowStart(42, t, row, size, block));
        seen.insert(start);
      }
    }
    if (size <= 11) {
      EXPECT_EQ(static_cast<int64_t>(seen.size()), size - block);  // every start drawn
    }
  }
  // A split of exactly block + 1 tokens has one window.
  EXPECT_EQ(TokenWindowStart(7, 3, 2, 65, 64), 0);
  // The documented formula.
  CounterRng rng(DeriveStreamSeed(DeriveStreamSeed(9, 4), 3));
  EXPECT_EQ(TokenWindowStart(9, 4, 3, 1000, 64), static_cast<int64_t>(rng.NextBelow(936)));
  EXPECT_NE(TokenWindowStart(9, 4, 3, 100000, 64), TokenWindowStart(9, 4, 2, 100000, 64));
  EXPECT_NE(TokenWindowStart(9, 4, 3, 100000, 64), TokenWindowStart(9, 5, 3, 100000, 64));
  EXPECT_NE(TokenWindowStart(9, 4, 3, 100000, 64), TokenWindowStart(10, 4, 3, 100000, 64));
}

}  // namespace
}  // namespace oflite
