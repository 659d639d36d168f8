#include "oneflow_lite/comm/shm/shm_transport.h"

#include <dirent.h>

#include "oneflow_lite/comm/memory/strategy_test_suite.h"
#include "oneflow_lite/comm/transport_test_suite.h"

namespace oflite {
namespace comm {
namespace {

TransportFactory ShmFactory() {
  return {"shm", [](const TransportOptions& options) -> StatusOr<std::unique_ptr<Transport>> {
            ASSIGN_OR_RETURN(auto transport, shm::CreateShmTransport(options, shm::ShmOptions()));
            return std::unique_ptr<Transport>(std::move(transport));
          }};
}

INSTANTIATE_TEST_SUITE_P(Shm, TransportConformanceTest, ::testing::Values(ShmFactory()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Shm, MemoryStrategyTest, ::testing::Values(ShmFactory()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace comm
}  // namespace oflite
