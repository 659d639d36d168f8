#include "oneflow_lite/comm/builtin_providers.h"

#include "oneflow_lite/comm/tcp/tcp_transport.h"

namespace oflite {
namespace comm {

ProviderRegistry BuiltinProviders(const BuiltinProviderOptions& options) {
  tcp::TcpOptions tcp_options;
  tcp_options.listen_host = options.listen_host;
  tcp_options.job_token = options.job_token;
  const ibverbs::IbverbsOptions verbs_options = options.ibverbs;
  ProviderFactory tcp = [tcp_options](const TransportOptions& transport) {
    return tcp::CreateTcpTransport(transport, tcp_options);
  };
  ProviderFactory verbs = [verbs_options](const TransportOptions& transport) {
    return ibverbs::CreateIbverbsTransport(transport, verbs_options);
  };
  auto note = options.note;
  ProviderRegistry registry;
  registry.Register("tcp", tcp);
  registry.Register("ibverbs", verbs);
  registry.Register("auto", [tcp, verbs, note](const TransportOptions& transport)
                                -> StatusOr<std::unique_ptr<Transport>> {
    StatusOr<std::unique_ptr<Transport>> created = verbs(transport);
    if (created.ok()) return created;
    if (note) note("--comm=auto: ibverbs unavailable (" + created.status().ToString() +
                   "); using tcp");
    return tcp(transport);
  });
  return registry;
}

}  // namespace comm
}  // namespace oflite
