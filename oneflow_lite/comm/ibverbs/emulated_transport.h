// Test-only: ibverbs transports over one shared VerbsEmulator fabric, so that
// every rank of a test (or of an in-process integration test) runs the real
// ibverbs provider in one process. Rank r gets its own emulated HCA
// "<prefix><r>" (created on first use) and sees only that device.
#ifndef ONEFLOW_LITE_COMM_IBVERBS_EMULATED_TRANSPORT_H_
#define ONEFLOW_LITE_COMM_IBVERBS_EMULATED_TRANSPORT_H_

#include <functional>
#include <memory>
#include <string>

#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/comm/verbs/emulator.h"

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

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_IBVERBS_EMULATED_TRANSPORT_H_
