#include "oneflow_lite/data/token_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "oneflow_lite/data/counter_rng.h"
#include "oneflow_lite/data/npy.h"

namespace oflite {
namespace {

bool IsNpy(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
}

// The id size of a raw token file, or InvalidArgument naming the file.
StatusOr<int64_t> RawIdSize(const std::string& path, const std::string& token_dtype) {
  if (token_dtype == "uint16") return int64_t{2};
  if (token_dtype == "int32") return int64_t{4};
  return InvalidArgumentError("token file '", path, "': token_dtype must be \"uint16\" or ",
                              "\"int32\" for a raw file, got \"", token_dtype, "\"");
}

// The .npy element types a token file may hold.
Status CheckNpyTokenType(const std::string& path, const std::string& type,
                         const std::vector<int64_t>& shape) {
  if (type != "uint16" && type != "int32" && type != "int64") {
    return InvalidArgumentError("token file '", path, "' holds ", type,
                                "; token ids must be uint16, int32 or int64");
  }
  if (shape.size() != 1) {
    return InvalidArgumentError("token file '", path, "' is a ", shape.size(),
                                "-D array; token ids must be 1-D (save ids.reshape(-1))");
  }
  return Status::OK();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("cannot open token file '", path, "': ", std::strerror(errno));
  }
  std::string bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return DataLossError("cannot read token file '", path, "'");
  bytes.resize(static_cast<size_t>(size));
  in.seekg(0);
  in.read(&bytes[0], static_cast<std::streamsize>(bytes.size()));
  if (static_cast<size_t>(in.gcount()) != bytes.size()) {
    return DataLossError("reading token file '", path, "' failed");
  }
  return bytes;
}

// Appends `count` little-endian ids of `Id` from `bytes` to `tokens`,
// checking each against the vocabulary.
template <typename Id>
Status AppendIds(const std::string& path, const unsigned char* bytes, int64_t count,
                 int64_t vocab_size, std::vector<int32_t>* tokens) {
  tokens->resize(static_cast<size_t>(count));
  int32_t* out = tokens->data();
  for (int64_t i = 0; i < count; ++i) {
    uint64_t bits = 0;
    for (size_t b = 0; b < sizeof(Id); ++b) bits |= uint64_t{bytes[i * sizeof(Id) + b]} << (8 * b);
    const int64_t id = static_cast<int64_t>(static_cast<Id>(bits));
    if (id < 0 || id >= vocab_size) {
      return InvalidArgumentError("'", path, "': token ", id, " at position ", i,
                                  " is outside the vocabulary [0, ", vocab_size, ")");
    }
    out[i] = static_cast<int32_t>(id);
  }
  return Status::OK();
}

}  // namespace

StatusOr<TokenSplit> TokenSplitRange(int64_t count, const std::string& split, double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    return InvalidArgumentError("val_fraction must be in [0, 1), got ", val_fraction);
  }
  // As Python's int(count * (1 - val_fraction)): the same doubles, truncated.
  const int64_t train = static_cast<int64_t>(static_cast<double>(count) * (1.0 - val_fraction));
  if (split == "train") return TokenSplit{0, train};
  if (split == "test") return TokenSplit{train, count - train};
  return InvalidArgumentError("split must be \"train\" or \"test\", got \"", split, "\"");
}

StatusOr<int64_t> CountTokens(const std::string& path, const std::string& token_dtype) {
  if (IsNpy(path)) {
    std::vector<int64_t> shape;
    ASSIGN_OR_RETURN(std::string type, ReadNpyElementType(path, &shape));
    RETURN_IF_ERROR(CheckNpyTokenType(path, type, shape));
    return shape[0];
  }
  ASSIGN_OR_RETURN(int64_t id_size, RawIdSize(path, token_dtype));
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    return NotFoundError("cannot open token file '", path, "': ", std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) return NotFoundError("token file '", path, "' is not a file");
  if (info.st_size % id_size != 0) {
    return DataLossError("token file '", path, "' has ", info.st_size, " bytes, not a multiple of ",
                         id_size, " (", token_dtype, " ids; wrong token_dtype or truncated?)");
  }
  return static_cast<int64_t>(info.st_size / id_size);
}

StatusOr<std::vector<int32_t>> ReadTokenFile(const std::string& path,
                                             const std::string& token_dtype, int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("token file '", path,
                                "': vocab_size must be in [1, 2^31 - 1], got ", vocab_size);
  }
  std::vector<int32_t> tokens;
  if (IsNpy(path)) {
    ASSIGN_OR_RETURN(std::string type, ReadNpyElementType(path));
    if (type == "uint16") {
      ASSIGN_OR_RETURN(NpyUint16Array array, ReadNpyUint16(path));
      RETURN_IF_ERROR(CheckNpyTokenType(path, type, array.shape));
      tokens.resize(array.values.size());
      for (size_t i = 0; i < array.values.size(); ++i) {
        if (array.values[i] >= vocab_size) {
          return InvalidArgumentError("'", path, "': token ", array.values[i], " at position ", i,
                                      " is outside the vocabulary [0, ", vocab_size, ")");
        }
        tokens[i] = array.values[i];
      }
      return tokens;
    }
    ASSIGN_OR_RETURN(NpyArray array, ReadNpy(path));
    RETURN_IF_ERROR(CheckNpyTokenType(path, type, array.shape));
    const auto* bytes = reinterpret_cast<const unsigned char*>(array.data.data());
    if (type == "int32") {
      RETURN_IF_ERROR(AppendIds<int32_t>(path, bytes, array.shape[0], vocab_size, &tokens));
    } else {
      RETURN_IF_ERROR(AppendIds<int64_t>(path, bytes, array.shape[0], vocab_size, &tokens));
    }
    return tokens;
  }
  ASSIGN_OR_RETURN(int64_t count, CountTokens(path, token_dtype));
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  if (static_cast<int64_t>(bytes.size()) != count * (token_dtype == "uint16" ? 2 : 4)) {
    return DataLossError("token file '", path, "' changed while it was read");
  }
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  if (token_dtype == "uint16") {
    RETURN_IF_ERROR(AppendIds<uint16_t>(path, data, count, vocab_size, &tokens));
  } else {
    RETURN_IF_ERROR(AppendIds<int32_t>(path, data, count, vocab_size, &tokens));
  }
  return tokens;
}

Status CheckSplitHoldsWindow(const std::string& path, const std::string& split, int64_t split_size,
                             int64_t block_size) {
  if (split_size >= block_size + 1) return Status::OK();
  return InvalidArgumentError("the ", split, " split of '", path, "' holds ", split_size,
                              " tokens, fewer than block_size ", block_size,
                              " + 1 (one window and its next-token target)");
}

Status CheckTokenFile(const std::string& path, const std::string& token_dtype, int64_t vocab_size,
                      int64_t block_size, double val_fraction) {
  if (block_size < 1) {
    return InvalidArgumentError("token file '", path, "': block_size must be >= 1, got ",
                                block_size);
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, ReadTokenFile(path, token_dtype, vocab_size));
  const int64_t count = static_cast<int64_t>(tokens.size());
  ASSIGN_OR_RETURN(TokenSplit train, TokenSplitRange(count, "train", val_fraction));
  RETURN_IF_ERROR(CheckSplitHoldsWindow(path, "train", train.size, block_size));
  if (val_fraction > 0.0) {
    ASSIGN_OR_RETURN(TokenSplit test, TokenSplitRange(count, "test", val_fraction));
    RETURN_IF_ERROR(CheckSplitHoldsWindow(path, "test", test.size, block_size));
  }
  return Status::OK();
}

int64_t TokenWindowStart(uint64_t seed, int64_t iteration, int64_t row, int64_t split_size,
                         int64_t block_size) {
  CounterRng rng(DeriveStreamSeed(DeriveStreamSeed(seed, static_cast<uint64_t>(iteration)),
                                  static_cast<uint64_t>(row)));
  return static_cast<int64_t>(rng.NextBelow(static_cast<uint64_t>(split_size - block_size)));
}

}  // namespace oflite
