#include "oneflow_lite/session/flags.h"

#include "oneflow_lite/session/exit_codes.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace oflite {
namespace cli {

StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& what) {
  const size_t digits = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
  if (text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos) {
    return InvalidArgumentError(what, " expects an integer, got '", text, "'");
  }
  errno = 0;
  const long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) {
    return InvalidArgumentError(what, ": '", text, "' does not fit in a 64-bit integer");
  }
  return static_cast<int64_t>(value);
}

StatusOr<bool> ParseBool(const std::string& text, const std::string& what) {
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  return InvalidArgumentError(what, " expects true or false (also 1/0, yes/no), got '", text,
                              "'");
}

FlagSet::FlagSet(std::string command, std::string usage, std::vector<FlagSpec> specs,
                 size_t max_positional)
    : command_(std::move(command)), usage_(std::move(usage)), specs_(std::move(specs)),
      max_positional_(max_positional) {}

const FlagSpec* FlagSet::Find(const std::string& name) const {
  for (const FlagSpec& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Status FlagSet::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      if (positional_.size() == max_positional_) {
        return InvalidArgumentError("unexpected argument '", arg, "' (see '", command_,
                                    " --help')");
      }
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagSpec* spec = Find(name);
    if (spec == nullptr && name.rfind("no", 0) == 0) {
      const FlagSpec* neg = Find(name.substr(2));
      if (neg != nullptr && neg->is_bool && !has_value) {
        values_[neg->name] = "false";
        continue;
      }
    }
    if (spec == nullptr) {
      return InvalidArgumentError("unknown flag '--", name, "' (see '", command_,
                                  " --help')");
    }
    if (!has_value) {
      if (spec->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return InvalidArgumentError("flag '--", name, "' needs a value");
      }
    }
    if (spec->is_bool) {
      StatusOr<bool> parsed = ParseBool(value, "flag '--" + name + "'");
      if (!parsed.ok()) return parsed.status();
      value = *parsed ? "true" : "false";
    }
    values_[name] = value;
  }
  return Status::OK();
}

StatusOr<double> FlagSet::GetPositiveDouble(const std::string& name) const {
  const std::string text = Get(name);
  char* end = nullptr;
  errno = 0;
  const double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value) || value <= 0) {
    return InvalidArgumentError("flag '--", name, "' must be a positive number, got '", text, "'");
  }
  return value;
}

std::optional<int> FlagSet::ParseCommandLine(int argc, char** argv, const std::string& program) {
  Status parsed = Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), parsed.ToString().c_str());
    return kExitBadInput;
  }
  if (help_requested()) {
    PrintHelp();
    return kExitOk;
  }
  return std::nullopt;
}

std::string FlagSet::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  const FlagSpec* spec = Find(name);
  CHECK(spec != nullptr) << "flag '" << name << "' not declared for " << command_;
  return spec->default_value;
}

bool FlagSet::GetBool(const std::string& name) const {
  const FlagSpec* spec = Find(name);
  CHECK(spec != nullptr && spec->is_bool) << "flag '" << name << "' is not a boolean of "
                                          << command_;
  // Parse normalized every given value; a default is written by the program
  // (an empty default is false).
  const std::string text = Get(name);
  if (text.empty()) return false;
  StatusOr<bool> value = ParseBool(text, "flag '--" + name + "'");
  CHECK(value.ok()) << value.status().ToString();
  return *value;
}

StatusOr<int64_t> FlagSet::GetInt(const std::string& name) const {
  return ParseInt64(Get(name), "flag '--" + name + "'");
}

StatusOr<int64_t> FlagSet::GetInt(const std::string& name, int64_t min, int64_t max) const {
  CHECK_LE(min, max) << "flag '" << name << "'";
  const std::string text = Get(name);
  const std::string what = "flag '--" + name + "'";
  StatusOr<int64_t> value = ParseInt64(text, what);
  if (!value.ok() || *value < min || *value > max) {
    return InvalidArgumentError(what, " must be an integer in [", min, ", ", max, "], got '",
                                text, "'");
  }
  return *value;
}

StatusOr<std::chrono::milliseconds> FlagSet::GetSeconds(const std::string& name,
                                                        int64_t min_seconds,
                                                        int64_t max_seconds) const {
  CHECK_LE(max_seconds, kMaxDurationSeconds) << "flag '" << name << "'";
  ASSIGN_OR_RETURN(int64_t seconds, GetInt(name, min_seconds, max_seconds));
  return std::chrono::milliseconds(seconds * 1000);  // |seconds| <= 30 days: no overflow
}

void FlagSet::PrintHelp() const {
  std::printf("usage: %s %s\n\nflags:\n", command_.c_str(), usage_.c_str());
  for (const FlagSpec& s : specs_) {
    std::string left = "--" + s.name + (s.is_bool ? "" : "=VALUE");
    std::printf("  %-26s %s", left.c_str(), s.help.c_str());
    if (!s.default_value.empty()) std::printf(" (default: %s)", s.default_value.c_str());
    std::printf("\n");
  }
}

}  // namespace cli
}  // namespace oflite
