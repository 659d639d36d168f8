// Provider-parameterized tests of the three registered-memory strategies.
// Instantiate per provider like the transport conformance suite:
//   INSTANTIATE_TEST_SUITE_P(Tcp, MemoryStrategyTest,
//                            ::testing::Values(MyFactory()));
// Link target: //oneflow_lite/comm/testing:memory_strategy_conformance (testonly).
#ifndef ONEFLOW_LITE_COMM_TESTING_MEMORY_STRATEGY_CONFORMANCE_H_
#define ONEFLOW_LITE_COMM_TESTING_MEMORY_STRATEGY_CONFORMANCE_H_

#include "oneflow_lite/comm/testing/transport_conformance.h"

namespace oflite {
namespace comm {

class MemoryStrategyTest : public ::testing::TestWithParam<TransportFactory> {};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TESTING_MEMORY_STRATEGY_CONFORMANCE_H_
