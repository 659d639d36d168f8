#include "oneflow_lite/comm/ibverbs/emulated_transport.h"

namespace oflite {
namespace comm {
namespace ibverbs {

TransportCreator EmulatedIbverbsCreator(
    const EmulatedFabricOptions& options,
    std::shared_ptr<verbs::VerbsEmulator> emulator) {
  if (emulator == nullptr) emulator = verbs::VerbsEmulator::Create();
  return [options, emulator](const TransportOptions& transport_options)
             -> StatusOr<std::unique_ptr<Transport>> {
    verbs::EmulatedDeviceOptions device = options.device;
    device.name = options.device_prefix + std::to_string(transport_options.rank);
    Status added = emulator->AddDevice(device);
    if (!added.ok() && added.code() != StatusCode::kAlreadyExists) {
      return added;
    }
    IbverbsOptions ibverbs = options.ibverbs;
    ibverbs.api = emulator->Api({device.name});
    ibverbs.device.device_name = device.name;
    return CreateIbverbsTransport(transport_options, ibverbs);
  };
}

TransportCreator JoinedIbverbsCreator(const std::string& fabric_name,
                                      const EmulatedFabricOptions& options) {
  return [fabric_name, options](const TransportOptions& transport_options)
             -> StatusOr<std::unique_ptr<Transport>> {
    ASSIGN_OR_RETURN(std::shared_ptr<verbs::VerbsEmulator> emulator,
                     verbs::VerbsEmulator::Join(fabric_name));
    verbs::EmulatedDeviceOptions device = options.device;
    device.name = options.device_prefix + std::to_string(transport_options.rank);
    RETURN_IF_ERROR(emulator->AddDevice(device));
    IbverbsOptions ibverbs = options.ibverbs;
    ibverbs.api = emulator->Api({device.name});
    ibverbs.device.device_name = device.name;
    return CreateIbverbsTransport(transport_options, ibverbs);
  };
}

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
