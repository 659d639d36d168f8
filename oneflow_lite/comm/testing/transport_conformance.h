// Provider conformance suite for the CommNet transport API (transport.h).
//
// Every provider runs the same tests by instantiating the value-parameterized
// suite with a factory that creates one Transport per rank inside this test
// process, e.g. in tcp/tcp_transport_test.cc:
//
//   INSTANTIATE_TEST_SUITE_P(Tcp, TransportConformanceTest,
//                            ::testing::Values(TcpFactory()));
//
// The factory is called once per rank with the rank's options; all ranks of a
// test share one process (the ibverbs factory shares one emulated fabric).
// Link target: //oneflow_lite/comm/testing:transport_conformance (testonly).
#ifndef ONEFLOW_LITE_COMM_TESTING_TRANSPORT_CONFORMANCE_H_
#define ONEFLOW_LITE_COMM_TESTING_TRANSPORT_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

struct TransportFactory {
  std::string name;
  std::function<StatusOr<std::unique_ptr<Transport>>(const TransportOptions&)>
      create;
};

inline std::ostream& operator<<(std::ostream& os,
                                const TransportFactory& factory) {
  return os << factory.name;
}

// Creates `options.size()` transports with `factory` (options[i].rank must be
// i) and connects every pair: endpoints exchanged in memory, Connect called
// from one thread per rank. Bounded by `timeout`.
StatusOr<std::vector<std::unique_ptr<Transport>>> CreateConnectedTransports(
    const TransportFactory& factory,
    const std::vector<TransportOptions>& options,
    std::chrono::milliseconds timeout);

class TransportConformanceTest
    : public ::testing::TestWithParam<TransportFactory> {};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TESTING_TRANSPORT_CONFORMANCE_H_
