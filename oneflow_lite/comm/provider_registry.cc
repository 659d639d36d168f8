#include "oneflow_lite/comm/provider_registry.h"

#include <glog/logging.h>

namespace oflite {
namespace comm {

void ProviderRegistry::Register(const std::string& name, ProviderFactory factory) {
  CHECK(factory) << "provider '" << name << "' registered without a factory";
  CHECK(factories_.emplace(name, std::move(factory)).second)
      << "provider '" << name << "' registered twice";
}

StatusOr<ProviderFactory> ProviderRegistry::Find(const std::string& name) const {
  auto found = factories_.find(name);
  if (found == factories_.end()) {
    return InvalidArgumentError("unknown transport provider '", name, "' (known: ", NameList(),
                                ")");
  }
  return found->second;
}

std::vector<std::string> ProviderRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& entry : factories_) names.push_back(entry.first);
  return names;
}

std::string ProviderRegistry::NameList() const {
  const std::vector<std::string> names = Names();
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " or " : ", ";
    list += names[i];
  }
  return list;
}

}  // namespace comm
}  // namespace oflite
