// The one flag layer of every command line (the oflite subcommands, the
// training driver's programs, the benchmarks): "--name=value", "--name
// value", boolean "--name" / "--noname" / "--name=false", and typed getters
// that check what a value means, not just its syntax.
//
// Every error is a Status (InvalidArgument) whose message names the flag or
// argument and, for numbers, the allowed range; the subcommands turn every
// such error into exit code 2 (commands.h). Parse refuses unknown flags and
// positional arguments beyond what the command declares (a stray argument
// is named). Numbers are parsed without overflow: an out-of-range value is an
// error naming the range, never a wrapped or clamped value, and durations
// given in seconds are range-checked before they are turned into
// milliseconds, so the conversion cannot overflow.
//
// A boolean flag takes only true/false, 1/0 or yes/no: "--eval=maybe" is an
// error naming the flag, never a silent false.
//
// A FlagSet is a value used on one thread: Parse once, then read.
#ifndef ONEFLOW_LITE_SESSION_FLAGS_H_
#define ONEFLOW_LITE_SESSION_FLAGS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace cli {

struct FlagSpec {
  std::string name;         // without dashes
  std::string help;
  bool is_bool = false;
  std::string default_value;
};

// The largest duration flag any command accepts, in seconds (30 days); its
// millisecond value fits in int64_t with room to spare.
inline constexpr int64_t kMaxDurationSeconds = 30LL * 24 * 3600;

class FlagSet {
 public:
  // `command`: the program as a user types it ("oflite run", "mlp"), named
  // in the help and in errors that point at it.
  // `max_positional`: how many positional arguments the command takes (e.g.
  // inspect's plan file); more are an error naming the first extra one.
  FlagSet(std::string command, std::string usage, std::vector<FlagSpec> specs,
          size_t max_positional = 0);

  // Parses argv (argv[0] is the command name). --help sets help_requested().
  Status Parse(int argc, char** argv);
  // Parse for a command's entry point: on an error prints "<program>:
  // <error>" to stderr and returns kExitBadInput; after --help prints the
  // help and returns kExitOk; otherwise returns nullopt (go on).
  std::optional<int> ParseCommandLine(int argc, char** argv, const std::string& program);
  bool help_requested() const { return help_; }
  void PrintHelp() const;

  // Has: given on the command line. Get: the value or the declared default
  // (a name that is not declared is a programmer bug: CHECK).
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name) const;
  // A flag declared is_bool (a programmer bug otherwise: CHECK).
  bool GetBool(const std::string& name) const;
  // Any int64_t; an error names the flag when the value is not an integer or
  // does not fit.
  StatusOr<int64_t> GetInt(const std::string& name) const;
  // An integer in [min, max]; an error names the flag, the value and the range.
  StatusOr<int64_t> GetInt(const std::string& name, int64_t min, int64_t max) const;
  // A positive finite decimal number (a learning rate); an error names the
  // flag and the value ("abc", "0", "-1", "inf", "1e999" are refused).
  StatusOr<double> GetPositiveDouble(const std::string& name) const;
  // A whole number of seconds in [min_seconds, max_seconds] (max_seconds at
  // most kMaxDurationSeconds), returned as milliseconds.
  StatusOr<std::chrono::milliseconds> GetSeconds(const std::string& name, int64_t min_seconds,
                                                 int64_t max_seconds) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  const FlagSpec* Find(const std::string& name) const;

  std::string command_;
  std::string usage_;
  std::vector<FlagSpec> specs_;
  size_t max_positional_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// Parses `text` as a decimal int64_t (optional sign, digits only, no
// overflow); `what` names it in the error (e.g. "flag '--iters'").
StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& what);
// true/1/yes or false/0/no; `what` names it in the error.
StatusOr<bool> ParseBool(const std::string& text, const std::string& what);

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_FLAGS_H_
