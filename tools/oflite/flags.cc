#include "tools/oflite/flags.h"

#include <cstdio>

namespace oflite {
namespace cli {

FlagSet::FlagSet(std::string command, std::string usage, std::vector<FlagSpec> specs)
    : command_(std::move(command)), usage_(std::move(usage)), specs_(std::move(specs)) {}

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
      return InvalidArgumentError("oflite ", command_, ": unknown flag '--", name,
                                  "' (see 'oflite ", command_, " --help')");
    }
    if (!has_value) {
      if (spec->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return InvalidArgumentError("oflite ", command_, ": flag '--", name, "' needs a value");
      }
    }
    values_[name] = value;
  }
  return Status::OK();
}

std::string FlagSet::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  const FlagSpec* spec = Find(name);
  CHECK(spec != nullptr) << "flag '" << name << "' not declared for " << command_;
  return spec->default_value;
}

bool FlagSet::GetBool(const std::string& name) const {
  std::string v = Get(name);
  return v == "true" || v == "1" || v == "yes";
}

StatusOr<int64_t> FlagSet::GetInt(const std::string& name) const {
  std::string v = Get(name);
  try {
    size_t pos = 0;
    int64_t x = std::stoll(v, &pos);
    if (pos != v.size()) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    return InvalidArgumentError("oflite ", command_, ": flag '--", name,
                                "' expects an integer, got '", v, "'");
  }
}

void FlagSet::PrintHelp() const {
  std::printf("usage: oflite %s %s\n\nflags:\n", command_.c_str(), usage_.c_str());
  for (const FlagSpec& s : specs_) {
    std::string left = "--" + s.name + (s.is_bool ? "" : "=VALUE");
    std::printf("  %-26s %s", left.c_str(), s.help.c_str());
    if (!s.default_value.empty()) std::printf(" (default: %s)", s.default_value.c_str());
    std::printf("\n");
  }
}

}  // namespace cli
}  // namespace oflite
