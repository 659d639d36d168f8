// Provider-specific behaviour of the ibverbs provider on the verbs emulator:
// MTU negotiation, InfiniBand vs RoCE addressing and GID selection, block
// splitting, fork safety, and errors when the peer's QP or HCA fails.
#include "oneflow_lite/comm/ibverbs/ibverbs_connection.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/ibverbs/ibverbs_transport_impl.h"
#include "oneflow_lite/comm/verbs_emulator/emulator.h"

namespace oflite {
namespace comm {
namespace ibverbs {
namespace {

using std::chrono::milliseconds;
using verbs::EmulatedDeviceOptions;
using verbs::LinkLayer;

constexpr milliseconds kTimeout{10000};

class PeerErrors {
 public:
  void Add(int peer, const Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    errors_.push_back({peer, status});
    cv_.notify_all();
  }
  bool Wait(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return !errors_.empty(); });
  }
  std::pair<int, Status> First() {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_.front();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::pair<int, Status>> errors_;
};

class IbverbsProviderTest : public ::testing::Test {
 protected:
  void SetUp() override { emulator_ = verbs::VerbsEmulator::Create(); }

  // Adds device "hca<rank>" and a transport of a 2-rank world on it.
  StatusOr<std::unique_ptr<IbverbsTransport>> Make(
      int rank, const EmulatedDeviceOptions& device_options,
      IbverbsOptions options = IbverbsOptions()) {
    EmulatedDeviceOptions device = device_options;
    device.name = "hca" + std::to_string(rank);
    RETURN_IF_ERROR(emulator_->AddDevice(device));
    TransportOptions transport;
    transport.rank = rank;
    transport.world_size = 2;
    transport.message_slots = 4;
    transport.message_slot_size = 256;
    transport.on_peer_error = [this, rank](int peer, const Status& status) {
      errors_[rank].Add(peer, status);
    };
    options.api = emulator_->Api({device.name});
    options.device.device_name = device.name;
    if (options.ack_timeout == IbverbsOptions().ack_timeout) {
      options.ack_timeout = 10;  // 4 ms
      options.retry_count = 3;
    }
    return IbverbsTransport::Create(transport, options);
  }

  static Status ConnectPair(IbverbsTransport* a, IbverbsTransport* b) {
    ASSIGN_OR_RETURN(std::string a_endpoint, a->LocalEndpoint(1));
    ASSIGN_OR_RETURN(std::string b_endpoint, b->LocalEndpoint(0));
    RETURN_IF_ERROR(a->Connect(1, b_endpoint, DeadlineAfter(kTimeout)));
    return b->Connect(0, a_endpoint, DeadlineAfter(kTimeout));
  }

  // Writes `size` bytes 0 -> 1 and reads them back, checking every byte.
  static void RoundTrip(IbverbsTransport* a, IbverbsTransport* b,
                        size_t size) {
    std::vector<uint8_t> source(size), remote(size), back(size);
    for (size_t i = 0; i < size; ++i) source[i] = uint8_t(i * 31 + 7);
    auto source_region = a->RegisterMemory(source.data(), size, kAccessAll);
    auto back_region = a->RegisterMemory(back.data(), size, kAccessAll);
    auto remote_region = b->RegisterMemory(remote.data(), size, kAccessAll);
    ASSERT_TRUE(source_region.ok() && back_region.ok() && remote_region.ok());
    auto link = a->GetConnection(1);
    ASSERT_TRUE(link.ok()) << link.status();
    Status status = WriteSync(*link, **source_region, 0,
                              (*remote_region)->remote_key(), 0, size,
                              DeadlineAfter(kTimeout));
    ASSERT_TRUE(status.ok()) << status;
    status = ReadSync(*link, **back_region, 0, (*remote_region)->remote_key(),
                      0, size, DeadlineAfter(kTimeout));
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(remote, source);
    EXPECT_EQ(back, source);
  }

  std::shared_ptr<verbs::VerbsEmulator> emulator_;
  PeerErrors errors_[2];
};

TEST_F(IbverbsProviderTest, PathMtuIsTheMinimumOfBothPorts) {
  EmulatedDeviceOptions big, small;
  small.active_mtu = IBV_MTU_1024;
  auto a = Make(0, big);
  auto b = Make(1, small);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(ConnectPair(a->get(), b->get()).ok());
  EXPECT_EQ((*a)->connection_for_test(1)->path_mtu(), IBV_MTU_1024);
  EXPECT_EQ((*b)->connection_for_test(0)->path_mtu(), IBV_MTU_1024);
  // The emulator drops frames above a port's MTU: this only works if the
  // negotiation picked the smaller one.
  RoundTrip(a->get(), b->get(), 10000);
}

TEST_F(IbverbsProviderTest, InfiniBandUsesLidsAndOptionallyAGrh) {
  for (int gid_index : {-1, 0}) {
    SCOPED_TRACE(gid_index);
    SetUp();
    IbverbsOptions options;
    options.device.gid_index = gid_index;
    auto a = Make(0, EmulatedDeviceOptions(), options);
    auto b = Make(1, EmulatedDeviceOptions(), options);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_FALSE((*a)->device().is_ethernet());
    EXPECT_EQ((*a)->device().port_attr().lid, 1);
    EXPECT_EQ((*a)->device().gid_index(), gid_index);
    ASSERT_TRUE(ConnectPair(a->get(), b->get()).ok());
    RoundTrip(a->get(), b->get(), 777);
  }
}

TEST_F(IbverbsProviderTest, RoceSelectsTheIpv4MappedV2GidOrTheGivenIndex) {
  EmulatedDeviceOptions roce;
  roce.link_layer = LinkLayer::kEthernet;
  // Emulated RoCE table: [0] fe80 v1, [1] fe80 v2, [2] IPv4 v1, [3] IPv4 v2.
  for (int gid_index : {-1, 0, 1, 2, 3}) {
    SCOPED_TRACE(gid_index);
    SetUp();
    IbverbsOptions options;
    options.device.gid_index = gid_index;
    auto a = Make(0, roce, options);
    auto b = Make(1, roce, options);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE((*a)->device().is_ethernet());
    EXPECT_EQ((*a)->device().gid_index(), gid_index < 0 ? 3 : gid_index);
    ASSERT_TRUE(ConnectPair(a->get(), b->get()).ok());
    RoundTrip(a->get(), b->get(), 4097);
  }
}

TEST_F(IbverbsProviderTest, BadGidChoicesFailWithClearErrors) {
  EmulatedDeviceOptions roce;
  roce.link_layer = LinkLayer::kEthernet;
  IbverbsOptions empty_entry;
  empty_entry.device.gid_index = 4;  // exists but empty
  auto a = Make(0, roce, empty_entry);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("GID index 4"), std::string::npos)
      << a.status();
  SetUp();
  // InfiniBand: one side wants a GRH, the other has no GID to offer.
  IbverbsOptions with_gid;
  with_gid.device.gid_index = 0;
  auto b = Make(0, EmulatedDeviceOptions(), with_gid);
  auto c = Make(1, EmulatedDeviceOptions());
  ASSERT_TRUE(b.ok() && c.ok());
  Status status = ConnectPair(b->get(), c->get());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--ib_gid_index"), std::string::npos)
      << status;
  // Mixed link layers cannot talk.
  SetUp();
  auto d = Make(0, EmulatedDeviceOptions());
  auto e = Make(1, roce);
  ASSERT_TRUE(d.ok() && e.ok());
  EXPECT_EQ(ConnectPair(d->get(), e->get()).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(IbverbsProviderTest, LargeTransfersAreSplitIntoBlocks) {
  EmulatedDeviceOptions device;
  device.max_message_size = 8192;  // a larger work request would fail
  IbverbsOptions options;
  options.block_size = 1 << 20;
  options.queue_depth = 4;  // and most blocks wait in software
  auto a = Make(0, device, options);
  auto b = Make(1, device, options);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(ConnectPair(a->get(), b->get()).ok());
  EXPECT_EQ((*a)->connection_for_test(1)->block_size(), 8192u);
  RoundTrip(a->get(), b->get(), 100003);
  RoundTrip(a->get(), b->get(), 8192);
  RoundTrip(a->get(), b->get(), 1);
  RoundTrip(a->get(), b->get(), 0);
}

TEST_F(IbverbsProviderTest, ForkInitRunsBeforeTheDeviceOpensUnlessDisabled) {
  auto a = Make(0, EmulatedDeviceOptions());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(emulator_->fork_init_calls(), 1);
  IbverbsOptions no_fork;
  no_fork.fork_safe = false;
  auto b = Make(1, EmulatedDeviceOptions(), no_fork);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(emulator_->fork_init_calls(), 1);
}

TEST_F(IbverbsProviderTest, PeerQpInErrorFailsOperationsAndReportsOnce) {
  auto a = Make(0, EmulatedDeviceOptions());
  auto b = Make(1, EmulatedDeviceOptions());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(ConnectPair(a->get(), b->get()).ok());
  std::vector<uint8_t> local(64), remote(64);
  auto local_region = (*a)->RegisterMemory(local.data(), 64, kAccessAll);
  auto remote_region = (*b)->RegisterMemory(remote.data(), 64, kAccessAll);
  ASSERT_TRUE(local_region.ok() && remote_region.ok());
  uint32_t peer_qp = (*b)->connection_for_test(0)->qp_num();
  ASSERT_TRUE(emulator_->InjectQpError("hca1", peer_qp).ok());
  Connection* link = *(*a)->GetConnection(1);
  Status status = ReadSync(link, **local_region, 0,
                           (*remote_region)->remote_key(), 0, 64,
                           DeadlineAfter(kTimeout));
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("IBV_WC_RETRY_EXC_ERR"), std::string::npos);
  EXPECT_NE(status.message().find("rank 1"), std::string::npos);
  EXPECT_EQ(link->status(), status);
  EXPECT_EQ(link->SendMessage("x", 1), status);
  ASSERT_TRUE(errors_[0].Wait(kTimeout));
  EXPECT_EQ(errors_[0].First().first, 1);
  // Rank 1 learns of it too: its QP is in error, so its side fails as well.
  ASSERT_TRUE(errors_[1].Wait(kTimeout));
  EXPECT_EQ(errors_[1].First().first, 0);
}

TEST_F(IbverbsProviderTest, HeartbeatDetectsADeadPeerWithoutTraffic) {
  IbverbsOptions options;
  options.heartbeat_interval = milliseconds(20);
  auto a = Make(0, EmulatedDeviceOptions(), options);
  auto b = Make(1, EmulatedDeviceOptions(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(ConnectPair(a->get(), b->get()).ok());
  Connection* link = *(*a)->GetConnection(1);
  ASSERT_TRUE(link->SendMessage("hello", 5).ok());
  ASSERT_TRUE(link->Flush(DeadlineAfter(kTimeout)).ok());
  // The peer's HCA vanishes: no goodbye, no traffic from rank 0's user.
  ASSERT_TRUE(emulator_->FailDevice("hca1").ok());
  auto start = Clock::now();
  ASSERT_TRUE(errors_[0].Wait(kTimeout));
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  Status error = errors_[0].First().second;
  EXPECT_EQ(error.code(), StatusCode::kUnavailable) << error;
  EXPECT_NE(error.message().find("heartbeat probe"), std::string::npos)
      << error;
  EXPECT_FALSE(link->Flush(DeadlineAfter(kTimeout)).ok());
}

TEST_F(IbverbsProviderTest, MessagesFlowBothWaysWithTinyRings) {
  std::mutex mutex;
  std::vector<std::string> received[2];
  for (int rank = 0; rank < 2; ++rank) {
    EmulatedDeviceOptions device;
    device.name = "hca" + std::to_string(rank);
    ASSERT_TRUE(emulator_->AddDevice(device).ok());
  }
  TransportOptions base;
  base.world_size = 2;
  base.message_slots = 1;  // one credit: every message waits for the last
  base.message_slot_size = 64;
  std::unique_ptr<IbverbsTransport> ends[2];
  for (int rank = 0; rank < 2; ++rank) {
    TransportOptions options = base;
    options.rank = rank;
    options.on_message = [&, rank](int, const void* data, size_t size) {
      std::lock_guard<std::mutex> lock(mutex);
      received[rank].emplace_back(static_cast<const char*>(data), size);
    };
    IbverbsOptions ibverbs;
    ibverbs.api = emulator_->Api({"hca" + std::to_string(rank)});
    ibverbs.device.device_name = "hca" + std::to_string(rank);
    ibverbs.rnr_retry = 0;
    auto transport = IbverbsTransport::Create(options, ibverbs);
    ASSERT_TRUE(transport.ok()) << transport.status();
    ends[rank] = std::move(*transport);
  }
  ASSERT_TRUE(ConnectPair(ends[0].get(), ends[1].get()).ok());
  constexpr int kCount = 200;
  for (int i = 0; i < kCount; ++i) {
    std::string text = "m" + std::to_string(i);
    ASSERT_TRUE((*ends[0]->GetConnection(1))->SendMessage(text.data(),
                                                          text.size()).ok());
    ASSERT_TRUE((*ends[1]->GetConnection(0))->SendMessage(text.data(),
                                                          text.size()).ok());
  }
  ASSERT_TRUE((*ends[0]->GetConnection(1))->Flush(DeadlineAfter(kTimeout)).ok());
  ASSERT_TRUE((*ends[1]->GetConnection(0))->Flush(DeadlineAfter(kTimeout)).ok());
  std::lock_guard<std::mutex> lock(mutex);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(received[rank].size(), size_t{kCount});
    for (int i = 0; i < kCount; ++i) {
      EXPECT_EQ(received[rank][i], "m" + std::to_string(i));
    }
  }
}

TEST(IbverbsTransportTest, RealLibraryWithoutHardwareIsUnavailable) {
  TransportOptions options;
  IbverbsOptions ibverbs;  // api null: dlopen libibverbs.so.1
  auto transport = CreateIbverbsTransport(options, ibverbs);
  if (transport.ok()) GTEST_SKIP() << "this machine has an active RDMA port";
  EXPECT_EQ(transport.status().code(), StatusCode::kUnavailable)
      << transport.status();
  EXPECT_NE(transport.status().message().find("RDMA unavailable"),
            std::string::npos)
      << transport.status();
}

TEST(IbverbsTransportTest, RejectsBadOptions) {
  TransportOptions options;
  options.message_slot_size = 8;  // no room for the slot header
  EXPECT_EQ(CreateIbverbsTransport(options, IbverbsOptions()).status().code(),
            StatusCode::kInvalidArgument);
  TransportOptions bad_rank;
  bad_rank.rank = 2;
  bad_rank.world_size = 2;
  EXPECT_EQ(CreateIbverbsTransport(bad_rank, IbverbsOptions()).status().code(),
            StatusCode::kInvalidArgument);
  IbverbsOptions bad_retry;
  bad_retry.retry_count = 8;
  EXPECT_EQ(
      CreateIbverbsTransport(TransportOptions(), bad_retry).status().code(),
      StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
