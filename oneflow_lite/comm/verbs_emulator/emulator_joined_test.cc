// The verbs emulator across processes (VerbsEmulator::Join), at the verbs
// level: two emulators joined to one fabric in this process stand for two
// processes (every packet between them goes through the fabric's sockets and
// process_vm_readv/writev, exactly as between processes). The ports claim
// distinct slots (LIDs), freed when their emulator goes; SEND, inline SEND,
// WRITE, WRITE_WITH_IMM and READ move the right bytes; the responder checks
// (rkey, posted receive) fail the way the in-process fabric fails; a LID
// nobody holds is unreachable (retry-exceeded after the QP timeout).
// comm/multiprocess_test.cc runs the same fabric between real processes.
#include <random>

#include "oneflow_lite/comm/testing/verbs_emulator_fixture.h"

namespace oflite {
namespace verbs {
namespace emulator_test {
namespace {

// Random, not the pid: concurrent runs in pid namespaces share pids, while
// abstract socket names are host-wide.
std::string TestFabric(const std::string& suffix = "") {
  static const std::string base = [] {
    std::random_device random;
    return "emulator-joined-test-" + std::to_string(random()) + "-" +
           std::to_string(random());
  }();
  return base + suffix;
}

class JoinedEmulatorTest : public EmulatorTest {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      auto joined = VerbsEmulator::Join(TestFabric());
      ASSERT_TRUE(joined.ok()) << joined.status();
      EmulatedDeviceOptions device;
      device.name = "ib" + std::to_string(i);
      ASSERT_TRUE((*joined)->AddDevice(device).ok());
      apis_[i] = (*joined)->Api();
    }
    api_ = apis_[0];
    first_.api = apis_[0].get();
    second_.api = apis_[1].get();
  }

  void OpenJoined() {
    Open("ib0", &first_);
    Open("ib1", &second_);
  }

  std::shared_ptr<const VerbsApi> apis_[2];
};

TEST_F(JoinedEmulatorTest, PortsClaimDistinctLidsFreedWithTheirEmulator) {
  OpenJoined();
  EXPECT_GE(first_.port.lid, 1);
  EXPECT_GE(second_.port.lid, 1);
  EXPECT_NE(first_.port.lid, second_.port.lid);
  // An emulator alone on another fabric name starts at slot 1 there; on
  // ours a third one gets a slot nobody holds.
  auto other = VerbsEmulator::Join(TestFabric("-other"));
  ASSERT_TRUE(other.ok());
  EmulatedDeviceOptions device;
  device.name = "x";
  ASSERT_TRUE((*other)->AddDevice(device).ok());
  {
    auto other_api = (*other)->Api();
    ibv_context* context = other_api->open_device(DeviceNamed("x", other_api.get()));
    ASSERT_NE(context, nullptr);
    ibv_port_attr port{};
    ASSERT_EQ(other_api->query_port(context, 1, &port), 0);
    EXPECT_EQ(port.lid, 1);
    EXPECT_EQ(other_api->close_device(context), 0);
  }
  {
    auto third = VerbsEmulator::Join(TestFabric());
    ASSERT_TRUE(third.ok());
    ASSERT_TRUE((*third)->AddDevice(device).ok());
  }  // destroyed: its slot is free again
  auto fourth = VerbsEmulator::Join(TestFabric());
  ASSERT_TRUE(fourth.ok());
  ASSERT_TRUE((*fourth)->AddDevice(device).ok());
  auto api = (*fourth)->Api();
  ibv_device* handle = DeviceNamed("x", api.get());
  ASSERT_NE(handle, nullptr);
  ibv_context* context = api->open_device(handle);
  ibv_port_attr port{};
  ASSERT_EQ(api->query_port(context, 1, &port), 0);
  EXPECT_NE(port.lid, first_.port.lid);
  EXPECT_NE(port.lid, second_.port.lid);
  EXPECT_LE(port.lid, 3);  // the third's slot was reused, not a fresh one
  EXPECT_EQ(api->close_device(context), 0);
}

TEST_F(JoinedEmulatorTest, BadFabricNameIsRefused) {
  for (const std::string& name : {std::string(), std::string("a/b"), std::string(65, 'x')}) {
    auto joined = VerbsEmulator::Join(name);
    EXPECT_EQ(joined.status().code(), StatusCode::kInvalidArgument) << name;
  }
}

TEST_F(JoinedEmulatorTest, SendWriteAndReadMoveBytesAcrossEmulators) {
  OpenJoined();
  Connect();
  std::vector<uint8_t> a(8192), b(8192);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 3 + 1);
  ibv_mr* mr_a = Register(first_, a.data(), a.size(), kFullAccess);
  ibv_mr* mr_b = Register(second_, b.data(), b.size(), kFullAccess);
  // SEND 3000 bytes into a posted receive.
  ASSERT_EQ(PostRecv(second_, b.data(), 4096, mr_b->lkey, 7), 0);
  ASSERT_EQ(PostSend(first_, IBV_WR_SEND, a.data(), 3000, mr_a->lkey, 1), 0);
  ibv_wc sent = Poll(first_);
  EXPECT_EQ(sent.status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent.wr_id, 1u);
  ibv_wc received = Poll(second_);
  EXPECT_EQ(received.status, IBV_WC_SUCCESS);
  EXPECT_EQ(received.wr_id, 7u);
  EXPECT_EQ(received.byte_len, 3000u);
  EXPECT_EQ(received.src_qp, first_.qp->qp_num);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 3000, b.begin()));
  // WRITE 5000 bytes at offset 100 of b.
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, a.data(), 5000, mr_a->lkey, 2,
                     reinterpret_cast<uint64_t>(b.data()) + 100, mr_b->rkey),
            0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 5000, b.begin() + 100));
  // READ b's first 4096 bytes into the second half of a.
  std::vector<uint8_t> expected(b.begin(), b.begin() + 4096);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_READ, a.data() + 4096, 4096,
                     mr_a->lkey, 3, reinterpret_cast<uint64_t>(b.data()),
                     mr_b->rkey),
            0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), a.begin() + 4096));
  // WRITE_WITH_IMM consumes a receive and carries the immediate.
  ASSERT_EQ(PostRecv(second_, nullptr, 0, mr_b->lkey, 8), 0);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE_WITH_IMM, a.data(), 16,
                     mr_a->lkey, 4, reinterpret_cast<uint64_t>(b.data()),
                     mr_b->rkey, htonl(0xabcd)),
            0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_SUCCESS);
  ibv_wc imm = Poll(second_);
  EXPECT_EQ(imm.status, IBV_WC_SUCCESS);
  EXPECT_EQ(imm.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(ntohl(imm.imm_data), 0xabcdu);
}

TEST_F(JoinedEmulatorTest, InlineSendCarriesItsBytesInThePacket) {
  OpenJoined();
  Connect();
  std::vector<uint8_t> b(64);
  ibv_mr* mr_b = Register(second_, b.data(), b.size(), kFullAccess);
  ASSERT_EQ(PostRecv(second_, b.data(), 64, mr_b->lkey, 1), 0);
  char text[] = "inline across the fabric";
  ibv_sge sge{reinterpret_cast<uint64_t>(text), sizeof(text), 0};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(Api(first_)->post_send(first_.qp, &wr, &bad), 0);
  std::memset(text, 0, sizeof(text));  // copied at post time
  EXPECT_EQ(Poll(first_).status, IBV_WC_SUCCESS);
  EXPECT_EQ(Poll(second_).byte_len, sizeof("inline across the fabric"));
  EXPECT_STREQ(reinterpret_cast<char*>(b.data()), "inline across the fabric");
}

TEST_F(JoinedEmulatorTest, ResponderChecksFailAsInProcess) {
  OpenJoined();
  PathOptions path;
  path.rnr_retry = 1;
  Connect(path);
  std::vector<uint8_t> a(256), b(256);
  ibv_mr* mr_a = Register(first_, a.data(), a.size(), kFullAccess);
  ibv_mr* mr_b = Register(second_, b.data(), b.size(), IBV_ACCESS_LOCAL_WRITE);
  // No receive posted: RNR NAK, retried once, then RNR_RETRY_EXC_ERR.
  ASSERT_EQ(PostSend(first_, IBV_WR_SEND, a.data(), 8, mr_a->lkey, 1), 0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(State(first_), IBV_QPS_ERR);
  // A fresh pair: WRITE to an MR without remote write access.
  TearDown();
  SetUp();
  OpenJoined();
  Connect();
  mr_a = Register(first_, a.data(), a.size(), kFullAccess);
  mr_b = Register(second_, b.data(), b.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, a.data(), 8, mr_a->lkey, 2,
                     reinterpret_cast<uint64_t>(b.data()), mr_b->rkey),
            0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(State(second_), IBV_QPS_ERR);  // the responder QP fails too
}

TEST_F(JoinedEmulatorTest, UnclaimedLidIsUnreachable) {
  // first_'s path points at a LID nobody on this fabric holds (a process
  // that died, or never came): packets are lost, the requester retries.
  OpenJoined();
  std::vector<uint8_t> a(64);
  ibv_mr* mr_a = Register(first_, a.data(), a.size(), kFullAccess);
  ASSERT_EQ(ToInit(&first_), 0);
  ibv_qp_attr rtr = RtrAttributes(first_, second_, PathOptions(), 100);
  rtr.ah_attr.dlid = 4000;  // a free slot of this fabric
  ASSERT_EQ(Api(first_)->modify_qp(first_.qp, &rtr, kRtrMask), 0);
  ASSERT_EQ(ToRts(&first_, PathOptions()), 0);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, a.data(), 8, mr_a->lkey, 1,
                     0x1000, 1),
            0);
  // timeout 8 (~1 ms) x (retry_cnt 2 + 1): well within the bound.
  EXPECT_EQ(Poll(first_).status, IBV_WC_RETRY_EXC_ERR);
}

}  // namespace
}  // namespace emulator_test
}  // namespace verbs
}  // namespace oflite
