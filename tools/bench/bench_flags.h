// What the benchmark mains need on top of the one flag layer
// (oneflow_lite/session/flags.h): every bench declares its flags as
// cli::FlagSpecs and parses them with cli::FlagSet; this header adds no
// syntax of its own, only the steps the benches repeat:
//   - GetIntList: a comma-separated list of integers ("--actors 1,8,64"),
//     each item range-checked like FlagSet::GetInt;
//   - ParseAndRead: parse the command line, then turn the values into the
//     bench's options, ending with the exit code of
//     oneflow_lite/session/exit_codes.h (0 after --help, 2 for a bad flag or
//     value, the error named on stderr);
//   - BenchMain: a bench's whole main, ParseAndRead then its run function.
// Header-only, single-threaded use in main.
#ifndef TOOLS_BENCH_BENCH_FLAGS_H_
#define TOOLS_BENCH_BENCH_FLAGS_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/session/exit_codes.h"
#include "oneflow_lite/session/flags.h"

namespace oflite {
namespace bench {

// The value of list flag `name` ("1,8,64" -> {1, 8, 64}). An empty list or
// item, or an item that is not an integer in [min, max], is an
// InvalidArgument naming the flag, the range and the value.
inline StatusOr<std::vector<int64_t>> GetIntList(const cli::FlagSet& flags, const std::string& name,
                                                 int64_t min, int64_t max) {
  const std::string text = flags.Get(name);
  std::vector<int64_t> values;
  size_t start = 0;
  while (true) {
    const size_t comma = std::min(text.find(',', start), text.size());
    StatusOr<int64_t> value = cli::ParseInt64(text.substr(start, comma - start), name);
    if (!value.ok() || *value < min || *value > max) {
      return InvalidArgumentError("flag '--", name,
                                  "' must be a comma-separated list of integers in [", min, ", ",
                                  max, "], got '", text, "'");
    }
    values.push_back(*value);
    if (comma == text.size()) return values;
    start = comma + 1;
  }
}

// Parses argv with `flags`, then reads the values with `read` (a callable
// taking the parsed const cli::FlagSet& and returning StatusOr<Options>).
// Returns the exit code to end with (kExitOk after --help; kExitBadInput
// after a bad flag or value, printed as "<program>: <error>"), or nullopt
// with `*options` set: run the bench.
template <typename Options, typename Read>
std::optional<int> ParseAndRead(cli::FlagSet* flags, int argc, char** argv,
                                const std::string& program, Read read, Options* options) {
  if (std::optional<int> done = flags->ParseCommandLine(argc, argv, program)) return done;
  StatusOr<Options> read_options = read(*flags);
  if (!read_options.ok()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), read_options.status().ToString().c_str());
    return cli::kExitBadInput;
  }
  *options = std::move(*read_options);
  return std::nullopt;
}

// A bench's main: parses argv with the flags `specs` ("usage: ... <program>
// <usage>" heads --help; `max_positional` as cli::FlagSet's), reads them
// with `read` and runs `run` with the options read. Returns the process exit
// code: ParseAndRead's when it ends early, otherwise run's.
template <typename Options>
int BenchMain(int argc, char** argv, const std::string& program, const std::string& usage,
              std::vector<cli::FlagSpec> specs, StatusOr<Options> (*read)(const cli::FlagSet&),
              int (*run)(const Options&), size_t max_positional = 0) {
  cli::FlagSet flags(program, usage, std::move(specs), max_positional);
  Options options;
  if (std::optional<int> done = ParseAndRead(&flags, argc, argv, program, read, &options)) {
    return *done;
  }
  return run(options);
}

}  // namespace bench
}  // namespace oflite

#endif  // TOOLS_BENCH_BENCH_FLAGS_H_
