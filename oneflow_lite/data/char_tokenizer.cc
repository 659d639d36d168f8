#include "oneflow_lite/data/char_tokenizer.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "oneflow_lite/data/npy.h"

namespace oflite {
namespace {

constexpr char kVocabularyHeader[] = "# oneflow-lite character vocabulary:";

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a quoted token ('a', '\n', '\x07'); false when malformed.
bool UnquoteByte(const std::string& quoted, unsigned char* byte) {
  if (quoted.size() < 3 || quoted.front() != '\'' || quoted.back() != '\'') return false;
  const std::string body = quoted.substr(1, quoted.size() - 2);
  if (body.size() == 1 && body[0] != '\\') {
    *byte = static_cast<unsigned char>(body[0]);
    return true;
  }
  if (body.size() == 2 && body[0] == '\\') {
    switch (body[1]) {
      case 'n':
        *byte = '\n';
        return true;
      case 't':
        *byte = '\t';
        return true;
      case 'r':
        *byte = '\r';
        return true;
      case '\\':
        *byte = '\\';
        return true;
      case '\'':
        *byte = '\'';
        return true;
      default:
        return false;
    }
  }
  if (body.size() == 4 && body[0] == '\\' && body[1] == 'x') {
    const int high = HexDigit(body[2]), low = HexDigit(body[3]);
    if (high < 0 || low < 0) return false;
    *byte = static_cast<unsigned char>(high * 16 + low);
    return true;
  }
  return false;
}

StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read ", what, " '", path, "': ", std::strerror(errno));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return DataLossError("reading ", what, " '", path, "' failed");
  return content.str();
}

}  // namespace

CharTokenizer::CharTokenizer(std::vector<unsigned char> bytes) : bytes_(std::move(bytes)) {
  ids_.fill(-1);
  for (size_t id = 0; id < bytes_.size(); ++id) ids_[bytes_[id]] = static_cast<int32_t>(id);
}

StatusOr<CharTokenizer> CharTokenizer::FromText(const std::string& text) {
  if (text.empty()) return InvalidArgumentError("CharTokenizer: the text is empty");
  std::array<bool, 256> seen{};
  for (unsigned char c : text) seen[c] = true;
  std::vector<unsigned char> bytes;
  for (int b = 0; b < 256; ++b) {
    if (seen[b]) bytes.push_back(static_cast<unsigned char>(b));
  }
  return CharTokenizer(std::move(bytes));
}

StatusOr<CharTokenizer> CharTokenizer::FromBytes(const std::vector<unsigned char>& bytes) {
  if (bytes.empty()) return InvalidArgumentError("CharTokenizer: the vocabulary is empty");
  for (size_t i = 1; i < bytes.size(); ++i) {
    if (bytes[i] <= bytes[i - 1]) {
      return InvalidArgumentError("CharTokenizer: vocabulary byte ", QuoteByte(bytes[i]), " of id ",
                                  i, " does not follow ", QuoteByte(bytes[i - 1]),
                                  " (bytes must be distinct and increasing)");
    }
  }
  return CharTokenizer(bytes);
}

StatusOr<std::vector<int32_t>> CharTokenizer::Encode(const std::string& text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (ids_[c] < 0) {
      return InvalidArgumentError("byte ", QuoteByte(c), " at position ", i,
                                  " is not in the vocabulary of ", bytes_.size());
    }
    ids[i] = ids_[c];
  }
  return ids;
}

StatusOr<std::string> CharTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return InvalidArgumentError("token ", ids[i], " at position ", i,
                                  " is outside the vocabulary [0, ", vocab_size(), ")");
    }
    text[i] = static_cast<char>(bytes_[static_cast<size_t>(ids[i])]);
  }
  return text;
}

std::string QuoteByte(unsigned char byte) {
  switch (byte) {
    case '\n':
      return "'\\n'";
    case '\t':
      return "'\\t'";
    case '\r':
      return "'\\r'";
    case '\\':
      return "'\\\\'";
    case '\'':
      return "'\\''";
    default:
      break;
  }
  if (byte >= 0x20 && byte < 0x7f) return std::string("'") + static_cast<char>(byte) + "'";
  char hex[8];
  std::snprintf(hex, sizeof(hex), "'\\x%02x'", byte);
  return hex;
}

std::string CharTokenizer::VocabularyText() const {
  std::string text = std::string(kVocabularyHeader) + " " + std::to_string(bytes_.size()) +
                     " tokens, one per line: id, a tab, the byte\n";
  for (size_t id = 0; id < bytes_.size(); ++id) {
    text += std::to_string(id) + "\t" + QuoteByte(bytes_[id]) + "\n";
  }
  return text;
}

StatusOr<CharTokenizer> CharTokenizer::ParseVocabulary(const std::string& text,
                                                       const std::string& source) {
  std::vector<unsigned char> bytes;
  std::istringstream lines(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    unsigned char byte = 0;
    if (tab == std::string::npos || line.substr(0, tab) != std::to_string(bytes.size()) ||
        !UnquoteByte(line.substr(tab + 1), &byte)) {
      return InvalidArgumentError(source, ": line ", number, " is not \"", bytes.size(),
                                  "<tab><quoted byte>\": \"", line, "\"");
    }
    bytes.push_back(byte);
  }
  StatusOr<CharTokenizer> tokenizer = FromBytes(bytes);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(source);
  return tokenizer;
}

Status CharTokenizer::WriteVocabulary(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgumentError("cannot write '", path, "': ", std::strerror(errno));
  out << VocabularyText();
  out.close();
  if (!out) return DataLossError("writing '", path, "' failed");
  return Status::OK();
}

StatusOr<CharTokenizer> CharTokenizer::ReadVocabulary(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "vocabulary"));
  return ParseVocabulary(text, "'" + path + "'");
}

StatusOr<std::string> ReadTextFiles(const std::vector<std::string>& files) {
  std::string text;
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(std::string content, ReadFile(file, "text file"));
    text += content;
  }
  return text;
}

StatusOr<PreparedCorpus> PrepareCorpus(const std::vector<std::string>& files,
                                       const std::string& out_dir) {
  if (files.empty()) return InvalidArgumentError("PrepareCorpus: no text files given");
  ASSIGN_OR_RETURN(std::string text, ReadTextFiles(files));
  if (text.empty()) {
    return InvalidArgumentError("PrepareCorpus: the text of '", files.front(), "'",
                                files.size() > 1 ? " and the others" : "", " is empty");
  }
  ASSIGN_OR_RETURN(CharTokenizer tokenizer, CharTokenizer::FromText(text));
  ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.Encode(text));
  std::vector<uint16_t> tokens(ids.begin(), ids.end());
  if (mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return InvalidArgumentError("PrepareCorpus: cannot create '", out_dir,
                                "': ", std::strerror(errno));
  }
  PreparedCorpus corpus;
  corpus.tokens_path = out_dir + "/tokens.npy";
  corpus.vocab_path = out_dir + "/vocab.txt";
  corpus.token_count = static_cast<int64_t>(tokens.size());
  corpus.vocab_size = tokenizer.vocab_size();
  RETURN_IF_ERROR(WriteNpyUint16(corpus.tokens_path, {corpus.token_count}, tokens.data()));
  RETURN_IF_ERROR(tokenizer.WriteVocabulary(corpus.vocab_path));
  return corpus;
}

StatusOr<std::vector<std::string>> DefaultCorpusFiles(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* listing = opendir(dir.c_str())) {
    while (const dirent* entry = readdir(listing)) {
      const std::string name = entry->d_name;
      if (name.empty() || name[0] == '.' || EndsWith(name, ".dat") || EndsWith(name, ".u8")) {
        continue;
      }
      const std::string path = dir + "/" + name;
      struct stat info;
      if (lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode)) files.push_back(path);
    }
    closedir(listing);
  }
  if (files.empty()) {
    return NotFoundError("no fortune text files under '", dir,
                         "' (the default corpus is Debian's fortunes package: run "
                         "tools/install_deps.sh, or give text files of your own)");
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace oflite
