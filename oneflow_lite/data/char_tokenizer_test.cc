#include "oneflow_lite/data/char_tokenizer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/data/token_file.h"

namespace oflite {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string AllBytes() {
  std::string text;
  for (int b = 255; b >= 0; --b) text += static_cast<char>(b);
  return text;
}

TEST(CharTokenizerTest, VocabularyIsTheSortedDistinctBytes) {
  StatusOr<CharTokenizer> tokenizer = CharTokenizer::FromText("hello, world\n");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string sorted = "\n ,dehlorw";
  ASSERT_EQ(tokenizer->vocab_size(), static_cast<int64_t>(sorted.size()));
  for (size_t id = 0; id < sorted.size(); ++id) {
    EXPECT_EQ(tokenizer->byte(static_cast<int64_t>(id)), static_cast<unsigned char>(sorted[id]));
  }
  StatusOr<std::vector<int32_t>> ids = tokenizer->Encode("hello");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{5, 4, 6, 6, 7}));
  EXPECT_FALSE(CharTokenizer::FromText("").ok());
}

TEST(CharTokenizerTest, RoundTripsEveryByteAndSizesZeroOneOdd) {
  const std::string everything = AllBytes();
  StatusOr<CharTokenizer> tokenizer = CharTokenizer::FromText(everything);
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ(tokenizer->vocab_size(), 256);
  for (const std::string& text :
       {std::string(), std::string("x"), std::string("caf\xc3\xa9 \n\t'\\\0z", 12), everything}) {
    StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ASSERT_EQ(ids->size(), text.size());
    StatusOr<std::string> back = tokenizer->Decode(*ids);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, text);
  }
}

TEST(CharTokenizerTest, UnknownBytesAndIdsNameThePosition) {
  StatusOr<CharTokenizer> tokenizer = CharTokenizer::FromText("abc");
  ASSERT_TRUE(tokenizer.ok());
  StatusOr<std::vector<int32_t>> encoded = tokenizer->Encode("abz\xc3");
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("byte 'z' at position 2"), std::string::npos)
      << encoded.status();
  encoded = tokenizer->Encode("ab\xc3");
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("byte '\\xc3' at position 2"), std::string::npos)
      << encoded.status();
  StatusOr<std::string> decoded = tokenizer->Decode({0, 1, 3});
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("token 3 at position 2"), std::string::npos)
      << decoded.status();
  EXPECT_FALSE(tokenizer->Decode({-1}).ok());
}

TEST(CharTokenizerTest, VocabularyFileIsReadableAndReadsBack) {
  StatusOr<CharTokenizer> tokenizer = CharTokenizer::FromText(AllBytes());
  ASSERT_TRUE(tokenizer.ok());
  const std::string text = tokenizer->VocabularyText();
  EXPECT_NE(text.find("\n10\t'\\n'\n"), std::string::npos);
  EXPECT_NE(text.find("\n32\t' '\n"), std::string::npos);
  EXPECT_NE(text.find("\n39\t'\\''\n"), std::string::npos);
  EXPECT_NE(text.find("\n92\t'\\\\'\n"), std::string::npos);
  EXPECT_NE(text.find("\n97\t'a'\n"), std::string::npos);
  EXPECT_NE(text.find("\n195\t'\\xc3'\n"), std::string::npos);
  const std::string path = TempPath("vocab.txt");
  ASSERT_TRUE(tokenizer->WriteVocabulary(path).ok());
  StatusOr<CharTokenizer> back = CharTokenizer::ReadVocabulary(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->vocab_size(), 256);
  for (int64_t id = 0; id < 256; ++id) EXPECT_EQ(back->byte(id), tokenizer->byte(id));
  // Malformed files name the file and line.
  for (const std::string& bad : {std::string("0\t'a'\n2\t'b'\n"), std::string("0\ta\n"),
                                 std::string("0\t'b'\n1\t'a'\n"), std::string("# empty\n")}) {
    StatusOr<CharTokenizer> parsed = CharTokenizer::ParseVocabulary(bad, "'v.txt'");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("'v.txt'"), std::string::npos) << parsed.status();
  }
  StatusOr<CharTokenizer> line2 = CharTokenizer::ParseVocabulary("0\t'a'\n2\t'b'\n", "'v.txt'");
  EXPECT_NE(line2.status().message().find("line 2"), std::string::npos) << line2.status();
  EXPECT_EQ(CharTokenizer::ReadVocabulary("/nonexistent/vocab.txt").status().code(),
            StatusCode::kNotFound);
}

TEST(PrepareCorpusTest, WritesTokensAndVocabularyOfTheConcatenatedFiles) {
  const std::string a = TempPath("a.txt"), b = TempPath("b.txt"), out = TempPath("corpus");
  WriteText(a, "to be or\n");
  WriteText(b, "not to be\n");
  StatusOr<PreparedCorpus> corpus = PrepareCorpus({a, b}, out);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->tokens_path, out + "/tokens.npy");
  EXPECT_EQ(corpus->token_count, 19);
  EXPECT_EQ(corpus->vocab_size, 8);  // \n ' ' b e n o r t
  StatusOr<NpyUint16Array> tokens = ReadNpyUint16(corpus->tokens_path);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  StatusOr<CharTokenizer> vocab = CharTokenizer::ReadVocabulary(corpus->vocab_path);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  StatusOr<std::string> text =
      vocab->Decode(std::vector<int32_t>(tokens->values.begin(), tokens->values.end()));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "to be or\nnot to be\n");
  // The token_window source reads it.
  EXPECT_TRUE(CheckTokenFile(corpus->tokens_path, "", corpus->vocab_size, 8, 0.0).ok());
  // Errors name the file.
  StatusOr<PreparedCorpus> missing = PrepareCorpus({a, "/nonexistent/c.txt"}, out);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/c.txt"), std::string::npos);
  const std::string empty = TempPath("empty.txt");
  WriteText(empty, "");
  EXPECT_FALSE(PrepareCorpus({empty}, out).ok());
  EXPECT_FALSE(PrepareCorpus({}, out).ok());
  EXPECT_FALSE(PrepareCorpus({a}, "/nonexistent/dir/out").ok());
}

TEST(DefaultCorpusFilesTest, ListsTheTextFilesSortedAndExplainsAnAbsentPackage) {
  const std::string dir = TempPath("fortunes");
  mkdir(dir.c_str(), 0755);
  for (const char* name : {"zippy", "art", "art.dat", "linux", "linux.dat", ".hidden"}) {
    WriteText(dir + "/" + name, "x\n%\n");
  }
  unlink((dir + "/art.u8").c_str());
  ASSERT_EQ(symlink("art", (dir + "/art.u8").c_str()), 0);
  StatusOr<std::vector<std::string>> files = DefaultCorpusFiles(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir + "/art", dir + "/linux", dir + "/zippy"}));
  StatusOr<std::vector<std::string>> absent = DefaultCorpusFiles("/nonexistent/fortunes");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find("tools/install_deps.sh"), std::string::npos);
  EXPECT_NE(absent.status().message().find("/nonexistent/fortunes"), std::string::npos);
}

// The installed package (tools/install_deps.sh): plain text only, sorted.
TEST(DefaultCorpusFilesTest, TheInstalledFortunes) {
  StatusOr<std::vector<std::string>> files = DefaultCorpusFiles();
  if (!files.ok()) GTEST_SKIP() << files.status();
  ASSERT_GT(files->size(), 10u);
  EXPECT_TRUE(std::is_sorted(files->begin(), files->end()));
  for (const std::string& file : *files) {
    EXPECT_EQ(file.find(".dat"), std::string::npos) << file;
    EXPECT_EQ(file.find(".u8"), std::string::npos) << file;
  }
  StatusOr<std::string> text = ReadTextFiles(*files);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_GT(text->size(), 1000000u);
  StatusOr<CharTokenizer> tokenizer = CharTokenizer::FromText(*text);
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_LE(tokenizer->vocab_size(), 256);
  EXPECT_GE(tokenizer->vocab_size(), 90);
}

}  // namespace
}  // namespace oflite
