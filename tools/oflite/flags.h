// A small flag parser for the subcommands: "--name=value", "--name value",
// boolean "--name". Unknown flags are errors naming the flag.
#ifndef ONEFLOW_LITE_TOOLS_OFLITE_FLAGS_H_
#define ONEFLOW_LITE_TOOLS_OFLITE_FLAGS_H_

#include <map>
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

class FlagSet {
 public:
  FlagSet(std::string command, std::string usage, std::vector<FlagSpec> specs);

  // Parses argv (argv[0] is the command name). --help sets help_requested().
  Status Parse(int argc, char** argv);
  bool help_requested() const { return help_; }
  void PrintHelp() const;

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  StatusOr<int64_t> GetInt(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  const FlagSpec* Find(const std::string& name) const;

  std::string command_;
  std::string usage_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_OFLITE_FLAGS_H_
