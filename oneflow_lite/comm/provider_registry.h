// ProviderRegistry: transport providers by name (the CLI's --comm values).
//
// A provider is one registration: a name and a factory that creates its
// Transport (ProviderFactory, comm_net.h). Tools build a registry once
// (builtin_providers.h registers tcp, ibverbs and auto), look the user's
// choice up with Find, and hand the factory to CommNet / the multi-machine
// session. Find's error lists the known names, so help texts and errors
// never hard-code the list.
//
// A plain value, not a singleton (several ranks may run in one process,
// each with its own settings). Not thread-safe for Register; Find, Names
// and NameList may be called concurrently once registration is over.
#ifndef ONEFLOW_LITE_COMM_PROVIDER_REGISTRY_H_
#define ONEFLOW_LITE_COMM_PROVIDER_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/comm/transport.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {

using ProviderFactory =
    std::function<StatusOr<std::unique_ptr<Transport>>(const TransportOptions&)>;

class ProviderRegistry {
 public:
  // `name` must be new and `factory` non-empty (programmer errors: CHECKed).
  void Register(const std::string& name, ProviderFactory factory);
  // InvalidArgument naming `name` and the known providers when unknown.
  StatusOr<ProviderFactory> Find(const std::string& name) const;
  // Registered names, sorted.
  std::vector<std::string> Names() const;
  // "a, b or c" for help texts and errors.
  std::string NameList() const;

 private:
  std::map<std::string, ProviderFactory> factories_;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_PROVIDER_REGISTRY_H_
