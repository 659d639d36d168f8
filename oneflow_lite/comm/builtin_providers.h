// The providers this build ships, registered by name:
//   tcp      comm/tcp over sockets, listening on `listen_host`;
//   shm      comm/shm: every peer on this host, through shared memory;
//   ibverbs  comm/ibverbs over RDMA (libibverbs opened at run time);
//   auto     per peer (per_peer_transport.h): shm for peers whose host
//            identity equals `host_id`, and for the others ibverbs when
//            libibverbs loads and a device opens, else tcp (each fallback
//            and its reason go to `note`). With an empty `host_id` every
//            peer takes the cross-host provider.
// A new provider is one Register call in builtin_providers.cc. Everything
// a provider needs comes in through BuiltinProviderOptions: nothing here
// reads the environment (the CLI does: OFLITE_HOST, OFLITE_JOB_TOKEN,
// OFLITE_HOST_ID).
#ifndef ONEFLOW_LITE_COMM_BUILTIN_PROVIDERS_H_
#define ONEFLOW_LITE_COMM_BUILTIN_PROVIDERS_H_

#include <functional>
#include <string>

#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/comm/provider_registry.h"
#include "oneflow_lite/comm/shm/shm_transport.h"

namespace oflite {
namespace comm {

struct BuiltinProviderOptions {
  std::string listen_host = "127.0.0.1";  // tcp: the address peers dial
  std::string job_token;                  // tcp: presented on every data connection
  ibverbs::IbverbsOptions ibverbs;        // device, port, GID index, queue depth...
  // --ib_emulator: when not empty, ibverbs (and auto's cross-host choice)
  // runs on the verbs emulator's host-wide fabric of this name, one emulated
  // device "emu-<rank>" per rank, instead of libibverbs (said through
  // `note` when a transport is created). Testing only.
  std::string ib_emulator;
  shm::ShmOptions shm;
  // auto: this process's host identity (DefaultHostIdentity(),
  // per_peer_transport.h, unless overridden for tests).
  std::string host_id;
  // Told why `auto` fell back; may be empty. Called on the thread that
  // creates the transport.
  std::function<void(const std::string&)> note;
};

ProviderRegistry BuiltinProviders(const BuiltinProviderOptions& options);

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_BUILTIN_PROVIDERS_H_
