// A byte-level character tokenizer and the corpus files it prepares for
// the token_window source (data/token_file.h).
//
// Every byte of a text is one character (UTF-8 text is tokenized byte by
// byte). The vocabulary is the sorted distinct bytes of the training text:
// id i is the i-th smallest byte, so the same text always gives the same
// ids. Encode refuses a byte the vocabulary lacks, Decode an id outside
// [0, vocab_size), each naming the position.
//
// PrepareCorpus turns text files into the two files a program trains from:
//   <out_dir>/tokens.npy  the whole text encoded, a 1-D uint16 .npy array;
//   <out_dir>/vocab.txt   the vocabulary, readable: a comment line, then one
//                         line per id: the id, a tab, and the byte quoted
//                         with C escapes ('a', ' ', '\n', '\'', '\xc3').
// ReadVocabulary loads vocab.txt back (to decode a model's output).
//
// The default corpus is Debian's `fortunes` package: public-domain
// quotations under /usr/share/games/fortunes, which tools/install_deps.sh
// installs. CharTokenizer is an immutable value: thread-safe to share.
#ifndef ONEFLOW_LITE_DATA_CHAR_TOKENIZER_H_
#define ONEFLOW_LITE_DATA_CHAR_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {

class CharTokenizer {
 public:
  // The vocabulary of `text`: its distinct bytes. InvalidArgument when the
  // text is empty.
  static StatusOr<CharTokenizer> FromText(const std::string& text);
  // The vocabulary whose id i is `bytes[i]`: distinct bytes in increasing
  // order, at least one, else InvalidArgument.
  static StatusOr<CharTokenizer> FromBytes(const std::vector<unsigned char>& bytes);

  int64_t vocab_size() const { return static_cast<int64_t>(bytes_.size()); }
  // The byte of id `id` (in [0, vocab_size)).
  unsigned char byte(int64_t id) const { return bytes_[static_cast<size_t>(id)]; }

  // The ids of `text`'s bytes; InvalidArgument for a byte outside the
  // vocabulary: "byte '\xc3' at position 12 is not in the vocabulary of 65".
  StatusOr<std::vector<int32_t>> Encode(const std::string& text) const;
  // The text of `ids`; InvalidArgument for an id outside [0, vocab_size),
  // naming its position.
  StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const;

  // vocab.txt's content, and the parse of it (`source` names it in errors:
  // a malformed line names its line number).
  std::string VocabularyText() const;
  static StatusOr<CharTokenizer> ParseVocabulary(const std::string& text,
                                                 const std::string& source);
  Status WriteVocabulary(const std::string& path) const;
  static StatusOr<CharTokenizer> ReadVocabulary(const std::string& path);

 private:
  explicit CharTokenizer(std::vector<unsigned char> bytes);

  std::vector<unsigned char> bytes_;  // id -> byte, increasing
  std::array<int32_t, 256> ids_;      // byte -> id, -1 when absent
};

// A byte quoted with C escapes, as vocab.txt writes it: 'a', '\n', '\xc3'.
std::string QuoteByte(unsigned char byte);

// The concatenated bytes of `files`, in order; NotFound naming a file that
// cannot be read.
StatusOr<std::string> ReadTextFiles(const std::vector<std::string>& files);

struct PreparedCorpus {
  std::string tokens_path;  // <out_dir>/tokens.npy
  std::string vocab_path;   // <out_dir>/vocab.txt
  int64_t token_count = 0;
  int64_t vocab_size = 0;
};

// Reads `files` (one or more, concatenated in order), builds the vocabulary
// of their text and writes tokens.npy and vocab.txt under `out_dir`
// (created when missing; its parent must exist). Errors name the file at
// fault; an empty text is InvalidArgument.
StatusOr<PreparedCorpus> PrepareCorpus(const std::vector<std::string>& files,
                                       const std::string& out_dir);

// Where Debian's `fortunes` package puts its text files.
inline constexpr char kDefaultCorpusDir[] = "/usr/share/games/fortunes";

// The plain-text fortune files of `dir` in sorted order: every regular
// file except the .dat indexes, the .u8 links and hidden files. NotFound
// when there are none, telling the user to run tools/install_deps.sh.
StatusOr<std::vector<std::string>> DefaultCorpusFiles(const std::string& dir = kDefaultCorpusDir);

}  // namespace oflite

#endif  // ONEFLOW_LITE_DATA_CHAR_TOKENIZER_H_
