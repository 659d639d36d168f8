// Token files: the token ids of a tokenized text, read by the token_window
// source (docs/ops.md, "data family") and checked by programs before they
// build a job.
//
// A token file is either a 1-D `.npy` array of uint16, int32 or int64 (its
// header says which; numpy.save(path, ids.astype(numpy.uint16))) or, for
// any other name, raw little-endian ids (nanoGPT's `train.bin`) whose type
// the caller names: "uint16" or "int32". Every id must lie in
// [0, vocab_size).
//
// The text is split like nanoGPT's: "train" is the first
// floor(count * (1 - val_fraction)) tokens and "test" the rest. A window
// of block_size T starting at s is tokens [s, s + T) as input and
// [s + 1, s + T + 1) as target, so a split must hold at least T + 1 tokens.
// TokenWindowStart says where the window of a (seed, iteration, row)
// starts; tools/bench/token_windows.py repeats it in Python.
//
// Every error names the file: a missing or unreadable file (NotFound), a
// corrupt one (DataLoss: a truncated .npy, a raw file whose size is not a
// multiple of its id size), an id outside the vocabulary or a split
// shorter than one window (InvalidArgument, naming the position, or the
// split, its token count and T). Thread-safe free functions.
#ifndef ONEFLOW_LITE_DATA_TOKEN_FILE_H_
#define ONEFLOW_LITE_DATA_TOKEN_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {

// The default split of the token_window source (nanoGPT's 90/10).
inline constexpr double kDefaultValFraction = 0.1;

struct TokenSplit {
  int64_t begin = 0;  // first token of the split in the file
  int64_t size = 0;   // tokens in the split
};

// The range of `split` ("train" or "test") in a file of `count` tokens;
// InvalidArgument for another split name or val_fraction outside [0, 1).
StatusOr<TokenSplit> TokenSplitRange(int64_t count, const std::string& split, double val_fraction);

// The number of tokens in `path`, from the .npy header or the raw file's
// size, without reading the ids. `token_dtype` ("uint16" or "int32") is
// the id type of a raw file; a .npy file's header decides its own.
StatusOr<int64_t> CountTokens(const std::string& path, const std::string& token_dtype);

// Every id of `path` as int32, each checked to be in [0, vocab_size)
// (vocab_size in [1, 2^31 - 1]); the first that is not gives
// "'<path>': token 70000 at position 1234 is outside the vocabulary
// [0, 65)".
StatusOr<std::vector<int32_t>> ReadTokenFile(const std::string& path,
                                             const std::string& token_dtype, int64_t vocab_size);

// InvalidArgument unless the `split` of `path` (`split_size` tokens) holds
// one window of `block_size`: "... the train split of '<path>' holds 40
// tokens, fewer than block_size 64 + 1".
Status CheckSplitHoldsWindow(const std::string& path, const std::string& split, int64_t split_size,
                             int64_t block_size);

// What a program checks before it builds a token_window job, so that it can
// exit with a usage error: the file reads, every id is in the vocabulary,
// and the train split (and, when val_fraction > 0, the test split) holds a
// window of block_size >= 1.
Status CheckTokenFile(const std::string& path, const std::string& token_dtype, int64_t vocab_size,
                      int64_t block_size, double val_fraction = kDefaultValFraction);

// Where the window of logical row `row` at `iteration` starts inside a
// split of `split_size` >= block_size + 1 tokens: uniform in
// [0, split_size - block_size - 1], drawn by NextBelow(split_size -
// block_size) of CounterRng(DeriveStreamSeed(DeriveStreamSeed(seed,
// iteration), row)) (data/counter_rng.h), so it depends on nothing else.
int64_t TokenWindowStart(uint64_t seed, int64_t iteration, int64_t row, int64_t split_size,
                         int64_t block_size);

}  // namespace oflite

#endif  // ONEFLOW_LITE_DATA_TOKEN_FILE_H_
