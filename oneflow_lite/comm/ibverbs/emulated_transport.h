// ibverbs transports over the verbs emulator, for running the real ibverbs
// provider without RDMA hardware:
//   * EmulatedIbverbsCreator: one in-process fabric shared by every rank of a
//     test (or of an in-process integration test). Rank r gets its own
//     emulated HCA "<prefix><r>" (created on first use) and sees only it.
//   * JoinedIbverbsCreator: each transport joins the host-wide fabric
//     `fabric_name` (VerbsEmulator::Join) with a fresh emulator owning one
//     device "<prefix><r>", so ranks in different processes (or in one
//     process, through the same sockets) reach each other. This is what
//     `oflite --comm ibverbs --ib_emulator=FABRIC` uses.
#ifndef ONEFLOW_LITE_COMM_IBVERBS_EMULATED_TRANSPORT_H_
#define ONEFLOW_LITE_COMM_IBVERBS_EMULATED_TRANSPORT_H_

#include <functional>
#include <memory>
#include <string>

#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/comm/verbs_emulator/emulator.h"

namespace oflite {
namespace comm {
namespace ibverbs {

struct EmulatedFabricOptions {
  std::string device_prefix = "emu";
  verbs::EmulatedDeviceOptions device;  // name is set per rank
  IbverbsOptions ibverbs;               // api and device name are set per rank
};

using TransportCreator = std::function<StatusOr<std::unique_ptr<Transport>>(
    const TransportOptions& options)>;

// Returns a creator bound to `emulator` (a fresh fabric when null).
TransportCreator EmulatedIbverbsCreator(
    const EmulatedFabricOptions& options = EmulatedFabricOptions(),
    std::shared_ptr<verbs::VerbsEmulator> emulator = nullptr);

// Returns a creator joining `fabric_name` for every transport it creates. The
// fabric's part owned by a transport lives as long as the transport (its
// VerbsApi keeps the emulator alive). A bad fabric name fails at creation
// with InvalidArgument naming it.
TransportCreator JoinedIbverbsCreator(
    const std::string& fabric_name,
    const EmulatedFabricOptions& options = EmulatedFabricOptions());

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_IBVERBS_EMULATED_TRANSPORT_H_
