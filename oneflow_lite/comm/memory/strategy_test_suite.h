// Provider-parameterized tests of the three registered-memory strategies.
// Instantiate per provider like the transport conformance suite:
//   INSTANTIATE_TEST_SUITE_P(Tcp, MemoryStrategyTest,
//                            ::testing::Values(MyFactory()));
// Link target: //oneflow_lite/comm/memory:strategy_test_suite (testonly).
#ifndef ONEFLOW_LITE_COMM_MEMORY_STRATEGY_TEST_SUITE_H_
#define ONEFLOW_LITE_COMM_MEMORY_STRATEGY_TEST_SUITE_H_

#include "oneflow_lite/comm/transport_test_suite.h"

namespace oflite {
namespace comm {

class MemoryStrategyTest : public ::testing::TestWithParam<TransportFactory> {};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_MEMORY_STRATEGY_TEST_SUITE_H_
