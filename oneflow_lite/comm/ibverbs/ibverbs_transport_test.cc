// The provider conformance suite (comm/testing/transport_conformance.h) on
// the ibverbs provider over the verbs emulator, on an InfiniBand and a RoCE
// fabric, with the event-driven progress thread and (InfiniBandPolling) the
// polling one. RNR retries are set to 0: flow control alone must keep
// receives posted. The registered-memory strategy suite
// (comm/testing/memory_strategy_conformance.h) runs on the same emulated
// fabrics.
#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"

#include "oneflow_lite/comm/ibverbs/emulated_transport.h"
#include "oneflow_lite/comm/testing/memory_strategy_conformance.h"
#include "oneflow_lite/comm/testing/transport_conformance.h"

namespace oflite {
namespace comm {
namespace {

TransportFactory EmulatedFactory(const std::string& name,
                                 verbs::LinkLayer link_layer,
                                 bool event_driven = true) {
  ibverbs::EmulatedFabricOptions options;
  options.device.link_layer = link_layer;
  options.ibverbs.event_driven = event_driven;
  options.ibverbs.rnr_retry = 0;
  options.ibverbs.ack_timeout = 10;  // 4 ms: a lost peer shows up fast
  options.ibverbs.heartbeat_interval = std::chrono::milliseconds(100);
  options.ibverbs.block_size = 256 * 1024;
  return {name, ibverbs::EmulatedIbverbsCreator(options)};
}

INSTANTIATE_TEST_SUITE_P(
    Ibverbs, TransportConformanceTest,
    ::testing::Values(EmulatedFactory("InfiniBand", verbs::LinkLayer::kInfiniBand),
                      EmulatedFactory("RoCE", verbs::LinkLayer::kEthernet),
                      EmulatedFactory("InfiniBandPolling",
                                      verbs::LinkLayer::kInfiniBand,
                                      /*event_driven=*/false)),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Ibverbs, MemoryStrategyTest,
    ::testing::Values(EmulatedFactory("InfiniBand", verbs::LinkLayer::kInfiniBand),
                      EmulatedFactory("RoCE", verbs::LinkLayer::kEthernet)),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace comm
}  // namespace oflite
