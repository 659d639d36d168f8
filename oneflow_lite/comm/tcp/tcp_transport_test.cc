#include "oneflow_lite/comm/tcp/tcp_transport.h"

#include "oneflow_lite/comm/memory/strategy_test_suite.h"
#include "oneflow_lite/comm/transport_test_suite.h"

namespace oflite {
namespace comm {
namespace {

TransportFactory TcpFactory() {
  return {"tcp", [](const TransportOptions& options) {
            tcp::TcpOptions tcp_options;
            tcp_options.job_token = "conformance";
            return tcp::CreateTcpTransport(options, tcp_options);
          }};
}

INSTANTIATE_TEST_SUITE_P(Tcp, TransportConformanceTest,
                         ::testing::Values(TcpFactory()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Tcp, MemoryStrategyTest,
                         ::testing::Values(TcpFactory()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace comm
}  // namespace oflite
