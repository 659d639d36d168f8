#include "oneflow_lite/comm/builtin_providers.h"

#include "oneflow_lite/comm/ibverbs/emulated_transport.h"
#include "oneflow_lite/comm/per_peer_transport.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"

namespace oflite {
namespace comm {
namespace {

using Created = StatusOr<std::unique_ptr<Transport>>;

}  // namespace

ProviderRegistry BuiltinProviders(const BuiltinProviderOptions& options) {
  tcp::TcpOptions tcp_options;
  tcp_options.listen_host = options.listen_host;
  tcp_options.job_token = options.job_token;
  const ibverbs::IbverbsOptions verbs_options = options.ibverbs;
  const shm::ShmOptions shm_options = options.shm;
  ProviderFactory tcp = [tcp_options](const TransportOptions& transport) {
    return tcp::CreateTcpTransport(transport, tcp_options);
  };
  ProviderFactory verbs = [verbs_options](const TransportOptions& transport) {
    return ibverbs::CreateIbverbsTransport(transport, verbs_options);
  };
  if (!options.ib_emulator.empty()) {  // only when asked for, and said so
    ibverbs::EmulatedFabricOptions emulated;
    emulated.device_prefix = "emu-";
    emulated.ibverbs = verbs_options;
    auto joined = ibverbs::JoinedIbverbsCreator(options.ib_emulator, emulated);
    verbs = [joined, note = options.note,
             fabric = options.ib_emulator](const TransportOptions& transport) {
      if (note) {
        note("ibverbs runs on the verbs emulator's fabric '" + fabric +
             "' (--ib_emulator, not an HCA)");
      }
      return joined(transport);
    };
  }
  ProviderFactory shm = [shm_options](const TransportOptions& transport) -> Created {
    ASSIGN_OR_RETURN(auto created, shm::CreateShmTransport(transport, shm_options));
    return std::unique_ptr<Transport>(std::move(created));
  };
  auto note = options.note;
  const std::string host_id = options.host_id;
  ProviderRegistry registry;
  registry.Register("tcp", tcp);
  registry.Register("shm", shm);
  registry.Register("ibverbs", verbs);
  registry.Register("auto", [tcp, verbs, shm_options, note,
                             host_id](const TransportOptions& transport) -> Created {
    Created remote = verbs(transport);
    if (!remote.ok()) {
      if (note) note("--comm=auto: ibverbs unavailable (" + remote.status().ToString() +
                     "); using tcp for peers on other hosts");
      remote = tcp(transport);
    }
    if (!remote.ok() || host_id.empty()) return remote;
    auto local = shm::CreateShmTransport(transport, shm_options);
    if (!local.ok()) {
      if (note) note("--comm=auto: shm unavailable (" + local.status().ToString() + ")");
      return remote;
    }
    return CreatePerPeerTransport(transport, std::move(*local), std::move(*remote), host_id);
  });
  return registry;
}

}  // namespace comm
}  // namespace oflite
