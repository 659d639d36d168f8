// The provider conformance suite (comm/testing/transport_conformance.h) and
// the registered-memory strategy suite on the ibverbs provider over the
// cross-process verbs emulator (VerbsEmulator::Join): every rank joins the
// fabric with its own emulator, so every packet, READ and WRITE between ranks
// goes through the fabric's unix sockets and process_vm_readv/writev, as
// between processes (comm/multiprocess_test.cc runs real processes).
#include <random>

#include "oneflow_lite/comm/ibverbs/emulated_transport.h"
#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/comm/testing/memory_strategy_conformance.h"
#include "oneflow_lite/comm/testing/transport_conformance.h"

namespace oflite {
namespace comm {
namespace {

TransportFactory JoinedFactory(const std::string& name,
                               verbs::LinkLayer link_layer) {
  ibverbs::EmulatedFabricOptions options;
  options.device.link_layer = link_layer;
  options.ibverbs.rnr_retry = 0;
  options.ibverbs.ack_timeout = 10;  // 4 ms: a lost peer shows up fast
  options.ibverbs.heartbeat_interval = std::chrono::milliseconds(100);
  options.ibverbs.block_size = 256 * 1024;
  // One fabric per test process and link layer: tests running at the same
  // time on this host never meet (random: pids repeat across pid namespaces).
  std::random_device random;
  std::string fabric = "joined-test-" + std::to_string(random()) + "-" +
                       std::to_string(random()) + "-" + name;
  return {name, ibverbs::JoinedIbverbsCreator(fabric, options)};
}

INSTANTIATE_TEST_SUITE_P(
    IbverbsJoined, TransportConformanceTest,
    ::testing::Values(JoinedFactory("InfiniBand", verbs::LinkLayer::kInfiniBand),
                      JoinedFactory("RoCE", verbs::LinkLayer::kEthernet)),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    IbverbsJoined, MemoryStrategyTest,
    ::testing::Values(JoinedFactory("InfiniBand", verbs::LinkLayer::kInfiniBand),
                      JoinedFactory("RoCE", verbs::LinkLayer::kEthernet)),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace comm
}  // namespace oflite
