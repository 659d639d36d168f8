#include "oneflow_lite/comm/per_peer_transport.h"

#include <gtest/gtest.h>

#include "oneflow_lite/comm/tcp/tcp_transport.h"
#include "oneflow_lite/comm/testing/memory_strategy_conformance.h"
#include "oneflow_lite/comm/testing/transport_conformance.h"

namespace oflite {
namespace comm {
namespace {

using std::chrono::milliseconds;

// `auto` with the host identity of each rank given by `host_of`.
TransportFactory AutoFactory(const std::string& name, std::function<std::string(int)> host_of) {
  return {name, [host_of](const TransportOptions& options) -> StatusOr<std::unique_ptr<Transport>> {
            ASSIGN_OR_RETURN(auto local, shm::CreateShmTransport(options, shm::ShmOptions()));
            tcp::TcpOptions tcp_options;
            tcp_options.job_token = "per-peer";
            ASSIGN_OR_RETURN(auto remote, tcp::CreateTcpTransport(options, tcp_options));
            return CreatePerPeerTransport(options, std::move(local), std::move(remote),
                                          host_of(options.rank));
          }};
}

// Ranks 0 and 1 share a host (shm between them); rank 2 is elsewhere (tcp).
TransportFactory Mixed() {
  return AutoFactory("mixed", [](int rank) { return rank == 2 ? "host-b" : "host-a"; });
}
// Every rank on its own host: everything over tcp.
TransportFactory Apart() {
  return AutoFactory("apart", [](int rank) { return "host-" + std::to_string(rank); });
}

INSTANTIATE_TEST_SUITE_P(Auto, TransportConformanceTest, ::testing::Values(Mixed(), Apart()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Auto, MemoryStrategyTest, ::testing::Values(Mixed(), Apart()),
                         [](const auto& info) { return info.param.name; });

TEST(PerPeerTransportTest, SameHostPeersUseShmOthersTheRemoteProviderWithOneKey) {
  std::vector<TransportOptions> options(3);
  for (int rank = 0; rank < 3; ++rank) {
    options[rank].rank = rank;
    options[rank].world_size = 3;
  }
  auto transports = CreateConnectedTransports(Mixed(), options, milliseconds(20000));
  ASSERT_TRUE(transports.ok()) << transports.status();
  Transport* rank0 = (*transports)[0].get();
  EXPECT_EQ(rank0->PeerProvider(1), "shm");
  EXPECT_EQ(rank0->PeerProvider(2), "tcp");
  EXPECT_EQ((*transports)[2]->PeerProvider(0), "tcp");
  EXPECT_EQ(DescribePeerProviders(*rank0), "auto: shm to rank 1; tcp to rank 2");
  EXPECT_EQ(DescribePeerProviders(*(*transports)[2]), "tcp");
  // One registration, one RemoteKey, read by a shm peer and a tcp peer.
  std::vector<uint8_t> source(4099);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7);
  auto region = rank0->RegisterMemory(source.data(), source.size(), kAccessAll);
  ASSERT_TRUE(region.ok()) << region.status();
  for (int reader : {1, 2}) {
    std::vector<uint8_t> copy(source.size());
    auto local = (*transports)[reader]->RegisterMemory(copy.data(), copy.size(), kAccessAll);
    ASSERT_TRUE(local.ok()) << local.status();
    Connection* link = *(*transports)[reader]->GetConnection(0);
    ASSERT_TRUE(ReadSync(link, **local, 0, (*region)->remote_key(), 0, copy.size(),
                         DeadlineAfter(milliseconds(20000)))
                    .ok());
    EXPECT_EQ(copy, source) << "reader rank " << reader;
  }
}

TEST(PerPeerTransportTest, DefaultHostIdentityIsStableAndNamesTheNetworkNamespace) {
  const std::string identity = DefaultHostIdentity();
  EXPECT_EQ(identity, DefaultHostIdentity());
  EXPECT_NE(identity.find("net:["), std::string::npos) << identity;
}

}  // namespace
}  // namespace comm
}  // namespace oflite
