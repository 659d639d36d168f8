// The emulator fails like hardware: protection and access errors, RNR,
// flushes, retry exhaustion (dead peer, wrong address, PSN or MTU), queue
// depth, CQ overrun, busy resources, a failed HCA.
#include "oneflow_lite/comm/verbs_emulator/emulator.h"

#include "oneflow_lite/comm/testing/verbs_emulator_fixture.h"

namespace oflite {
namespace verbs {
namespace emulator_test {
namespace {

TEST_F(EmulatorTest, WrongLkeyIsLocalProtectionErrorThenFlush) {
  OpenBoth();
  Connect();
  std::vector<char> buffer(256, 'x');
  ibv_mr* mr = Register(first_, buffer.data(), 128, kFullAccess);
  std::vector<char> remote(256);
  ibv_mr* remote_mr = Register(second_, remote.data(), 256, kFullAccess);
  uint64_t remote_address = reinterpret_cast<uint64_t>(remote.data());
  // Bytes 128.. lie outside the registration: unregistered memory.
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, buffer.data() + 100, 64,
                     mr->lkey, 1, remote_address, remote_mr->rkey),
            0);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, buffer.data(), 8, mr->lkey,
                     2, remote_address, remote_mr->rkey),
            0);
  ibv_wc wc = Poll(first_);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR) << WcStatusName(wc.status);
  wc = Poll(first_);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << WcStatusName(wc.status);
  EXPECT_EQ(State(first_), IBV_QPS_ERR);
  EXPECT_EQ(remote[0], 0);  // nothing was written
  // Posting in ERR is accepted and flushed.
  ASSERT_EQ(PostSend(first_, IBV_WR_SEND, buffer.data(), 8, mr->lkey, 3), 0);
  wc = Poll(first_);
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(EmulatorTest, WrongLkeyAndReadIntoReadOnlyMemory) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "wrong lkey" : "read into read-only MR");
    TearDown();
    OpenBoth();
    Connect();
    std::vector<char> local(64), remote(64, 'q');
    int local_access = variant == 0 ? kFullAccess : IBV_ACCESS_REMOTE_READ;
    ibv_mr* local_mr = Register(first_, local.data(), 64, local_access);
    ibv_mr* remote_mr = Register(second_, remote.data(), 64, kFullAccess);
    uint32_t lkey = variant == 0 ? local_mr->lkey + 0x100 : local_mr->lkey;
    ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_READ, local.data(), 64, lkey, 1,
                       reinterpret_cast<uint64_t>(remote.data()),
                       remote_mr->rkey),
              0);
    ibv_wc wc = Poll(first_);
    EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR) << WcStatusName(wc.status);
    EXPECT_EQ(local[0], 0);
  }
}

TEST_F(EmulatorTest, RemoteKeyAndAccessViolationsAreRemoteAccessErrors) {
  struct Case {
    const char* name;
    int remote_access;
    ibv_wr_opcode opcode;
    int rkey_delta;
    int offset;
  };
  const Case cases[] = {
      {"wrong rkey", kFullAccess, IBV_WR_RDMA_WRITE, 0x100, 0},
      {"no REMOTE_WRITE", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
       IBV_WR_RDMA_WRITE, 0, 0},
      {"no REMOTE_READ", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
       IBV_WR_RDMA_READ, 0, 0},
      {"beyond the region", kFullAccess, IBV_WR_RDMA_READ, 0, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TearDown();
    OpenBoth();
    Connect();
    std::vector<char> local(64, 'l'), remote(64, 'r');
    ibv_mr* local_mr = Register(first_, local.data(), 64, kFullAccess);
    ibv_mr* remote_mr = Register(second_, remote.data(), 64, c.remote_access);
    ASSERT_EQ(PostRecv(second_, nullptr, 0, 0, 55), 0);
    ASSERT_EQ(PostSend(first_, c.opcode, local.data(), 64, local_mr->lkey, 1,
                       reinterpret_cast<uint64_t>(remote.data()) + c.offset,
                       remote_mr->rkey + c.rkey_delta),
              0);
    ibv_wc wc = Poll(first_);
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << WcStatusName(wc.status);
    EXPECT_EQ(State(first_), IBV_QPS_ERR);
    // The responder QP is in error too; its receive is flushed.
    ibv_wc flushed = Poll(second_);
    EXPECT_EQ(flushed.wr_id, 55u);
    EXPECT_EQ(flushed.status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(State(second_), IBV_QPS_ERR);
    EXPECT_EQ(local[0], 'l');
    EXPECT_EQ(remote[0], 'r');
  }
}

TEST_F(EmulatorTest, KeysOfAnotherProtectionDomainAreRejected) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "remote MR in another PD"
                              : "local MR in another PD");
    TearDown();
    OpenBoth();
    Connect();
    Node& owner = variant == 0 ? second_ : first_;
    ibv_pd* other_pd = api_->alloc_pd(owner.context);
    ASSERT_NE(other_pd, nullptr);
    std::vector<char> local(32, 'l'), remote(32, 'r');
    ibv_mr* foreign = api_->reg_mr(
        other_pd, variant == 0 ? remote.data() : local.data(), 32,
        kFullAccess);
    ASSERT_NE(foreign, nullptr);
    ibv_mr* local_mr =
        variant == 0 ? Register(first_, local.data(), 32, kFullAccess)
                     : foreign;
    ibv_mr* remote_mr =
        variant == 0 ? foreign
                     : Register(second_, remote.data(), 32, kFullAccess);
    ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 32,
                       local_mr->lkey, 1,
                       reinterpret_cast<uint64_t>(remote.data()),
                       remote_mr->rkey),
              0);
    ibv_wc wc = Poll(first_);
    EXPECT_EQ(wc.status,
              variant == 0 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_LOC_PROT_ERR)
        << WcStatusName(wc.status);
    EXPECT_EQ(remote[0], 'r');
    EXPECT_EQ(api_->dereg_mr(foreign), 0);
    EXPECT_EQ(api_->dealloc_pd(other_pd), 0);
  }
}

TEST_F(EmulatorTest, QpAccessFlagsAreEnforcedLikeMrFlags) {
  OpenBoth();
  PathOptions path;
  path.qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  Connect(path);
  std::vector<char> local(8, 'l'), remote(8, 'r');
  ibv_mr* local_mr = Register(first_, local.data(), 8, kFullAccess);
  ibv_mr* remote_mr = Register(second_, remote.data(), 8, kFullAccess);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 8,
                     local_mr->lkey, 1,
                     reinterpret_cast<uint64_t>(remote.data()),
                     remote_mr->rkey),
            0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(EmulatorTest, SendWithoutReceiveFollowsRnrSemantics) {
  OpenBoth();
  PathOptions path;
  path.rnr_retry = 2;
  path.min_rnr_timer = 1;  // 10 us
  Connect(path);
  char message[16] = "hello";
  ibv_mr* mr = Register(first_, message, sizeof(message), kFullAccess);
  ASSERT_EQ(PostSend(first_, IBV_WR_SEND, message, 6, mr->lkey, 1), 0);
  ibv_wc wc = Poll(first_);
  EXPECT_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR) << WcStatusName(wc.status);
  EXPECT_EQ(State(first_), IBV_QPS_ERR);
  EXPECT_EQ(State(second_), IBV_QPS_RTS);  // an RNR does not hurt the responder
}

TEST_F(EmulatorTest, InfiniteRnrRetryWaitsForTheReceiveAsynchronously) {
  OpenBoth();
  PathOptions path;
  path.rnr_retry = 7;  // forever
  path.min_rnr_timer = 1;
  Connect(path);
  char message[16] = "later";
  char inbox[16] = {};
  ibv_mr* mr = Register(first_, message, sizeof(message), kFullAccess);
  ibv_mr* inbox_mr = Register(second_, inbox, sizeof(inbox), kFullAccess);
  ASSERT_EQ(PostSend(first_, IBV_WR_SEND, message, 6, mr->lkey, 1), 0);
  // post_send returned; delivery has not happened and cannot until a receive.
  EXPECT_TRUE(NoCompletionFor(first_, std::chrono::milliseconds(30)));
  ASSERT_EQ(PostRecv(second_, inbox, sizeof(inbox), inbox_mr->lkey, 2), 0);
  ibv_wc wc = Poll(first_);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(Poll(second_).byte_len, 6u);
  EXPECT_STREQ(inbox, "later");
}

TEST_F(EmulatorTest, ReceiveTooSmallIsLengthError) {
  OpenBoth();
  Connect();
  char message[32] = "0123456789abcdef";
  char inbox[8] = {};
  ibv_mr* mr = Register(first_, message, sizeof(message), kFullAccess);
  ibv_mr* inbox_mr = Register(second_, inbox, sizeof(inbox), kFullAccess);
  ASSERT_EQ(PostRecv(second_, inbox, sizeof(inbox), inbox_mr->lkey, 2), 0);
  ASSERT_EQ(PostSend(first_, IBV_WR_SEND, message, 16, mr->lkey, 1), 0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(Poll(second_).status, IBV_WC_LOC_LEN_ERR);
}

TEST_F(EmulatorTest, PeerInErrorMakesRequesterTimeOut) {
  OpenBoth();
  PathOptions path;
  path.timeout = 4;  // 65 us
  path.retry_cnt = 3;
  Connect(path);
  char data[8] = "abc";
  ibv_mr* mr = Register(first_, data, sizeof(data), kFullAccess);
  ibv_mr* remote_mr = Register(second_, data, sizeof(data), kFullAccess);
  ASSERT_TRUE(
      emulator_->InjectQpError("ib1", second_.qp->qp_num).ok());
  EXPECT_EQ(State(second_), IBV_QPS_ERR);
  EXPECT_EQ(emulator_->InjectQpError("ib1", 0xabcdef).code(),
            StatusCode::kNotFound);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, data, 8, mr->lkey, 1,
                     reinterpret_cast<uint64_t>(data), remote_mr->rkey),
            0);
  ibv_wc wc = Poll(first_);
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << WcStatusName(wc.status);
}

TEST_F(EmulatorTest, WrongAddressOrPsnIsDroppedUntilRetryExceeded) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant);
    TearDown();
    OpenBoth();
    PathOptions path;
    path.timeout = 4;
    path.retry_cnt = 1;
    ASSERT_EQ(ToInit(&first_), 0);
    ASSERT_EQ(ToInit(&second_), 0);
    ibv_qp_attr a = RtrAttributes(first_, second_, path, path.send_psn);
    ibv_qp_attr b = RtrAttributes(second_, first_, path, path.send_psn);
    if (variant == 0) a.ah_attr.dlid = 9;           // nobody there
    if (variant == 1) b.rq_psn = path.send_psn + 1;  // peer expects other PSN
    ASSERT_EQ(api_->modify_qp(first_.qp, &a, kRtrMask), 0);
    ASSERT_EQ(api_->modify_qp(second_.qp, &b, kRtrMask), 0);
    ASSERT_EQ(ToRts(&first_, path), 0);
    ASSERT_EQ(ToRts(&second_, path), 0);
    char data[8] = "abc";
    ibv_mr* mr = Register(first_, data, sizeof(data), kFullAccess);
    ibv_mr* remote_mr = Register(second_, data, sizeof(data), kFullAccess);
    ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, data, 8, mr->lkey, 1,
                       reinterpret_cast<uint64_t>(data), remote_mr->rkey),
              0);
    ibv_wc wc = Poll(first_);
    EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << WcStatusName(wc.status);
  }
}

TEST_F(EmulatorTest, RoceVersionMismatchIsDroppedUntilRetryExceeded) {
  EmulatedDeviceOptions roce;
  roce.link_layer = LinkLayer::kEthernet;
  roce.name = "roce0";
  ASSERT_TRUE(emulator_->AddDevice(roce).ok());
  roce.name = "roce1";
  ASSERT_TRUE(emulator_->AddDevice(roce).ok());
  Open("roce0", &first_);
  Open("roce1", &second_);
  PathOptions v1, v2;
  v1.gid_index = 2;  // ::ffff:10.0.0.x as RoCE v1
  v2.gid_index = 3;  // the same address as RoCE v2
  for (PathOptions* path : {&v1, &v2}) {
    path->timeout = 4;
    path->retry_cnt = 1;
  }
  ASSERT_EQ(ToInit(&first_), 0);
  ASSERT_EQ(ToInit(&second_), 0);
  ibv_qp_attr a = RtrAttributes(first_, second_, v1, v1.send_psn);
  ibv_qp_attr b = RtrAttributes(second_, first_, v2, v1.send_psn);
  ASSERT_EQ(api_->modify_qp(first_.qp, &a, kRtrMask), 0);
  ASSERT_EQ(api_->modify_qp(second_.qp, &b, kRtrMask), 0);
  ASSERT_EQ(ToRts(&first_, v1), 0);
  ASSERT_EQ(ToRts(&second_, v2), 0);
  char data[8] = "abc";
  ibv_mr* mr = Register(first_, data, sizeof(data), kFullAccess);
  ibv_mr* remote_mr = Register(second_, data, sizeof(data), kFullAccess);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, data, 8, mr->lkey, 1,
                     reinterpret_cast<uint64_t>(data), remote_mr->rkey),
            0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_RETRY_EXC_ERR);
}

TEST_F(EmulatorTest, PathMtuAbovePeerPortIsDropped) {
  EmulatedDeviceOptions small;
  small.name = "small";
  small.active_mtu = IBV_MTU_1024;
  ASSERT_TRUE(emulator_->AddDevice(small).ok());
  Open("ib0", &first_);
  Open("small", &second_);
  PathOptions path;
  path.timeout = 4;
  path.retry_cnt = 1;
  ASSERT_EQ(ToInit(&first_), 0);
  ASSERT_EQ(ToInit(&second_), 0);
  ibv_qp_attr a = RtrAttributes(first_, second_, path, path.send_psn);
  ibv_qp_attr b = RtrAttributes(second_, first_, path, path.send_psn);
  a.path_mtu = IBV_MTU_2048;  // valid locally (ib0 does 4096), not for "small"
  ASSERT_EQ(api_->modify_qp(first_.qp, &a, kRtrMask), 0);
  b.path_mtu = IBV_MTU_2048;  // refused locally: "small" does 1024
  EXPECT_EQ(api_->modify_qp(second_.qp, &b, kRtrMask), EINVAL);
  b.path_mtu = IBV_MTU_1024;
  ASSERT_EQ(api_->modify_qp(second_.qp, &b, kRtrMask), 0);
  ASSERT_EQ(ToRts(&first_, path), 0);
  ASSERT_EQ(ToRts(&second_, path), 0);
  char data[8] = "abc";
  ibv_mr* mr = Register(first_, data, sizeof(data), kFullAccess);
  ibv_mr* remote_mr = Register(second_, data, sizeof(data), kFullAccess);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, data, 8, mr->lkey, 1,
                     reinterpret_cast<uint64_t>(data), remote_mr->rkey),
            0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_RETRY_EXC_ERR);
}

TEST_F(EmulatorTest, QueueDepthAndCompletionQueueOverrun) {
  Open("ib0", &first_, /*queue_depth=*/2, /*cqe=*/3);
  Open("ib1", &second_);
  Connect();
  std::vector<char> local(64), remote(64);
  ibv_mr* mr = Register(first_, local.data(), 64, kFullAccess);
  ibv_mr* remote_mr = Register(second_, remote.data(), 64, kFullAccess);
  uint64_t address = reinterpret_cast<uint64_t>(remote.data());
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 8, mr->lkey, 1,
                     address, remote_mr->rkey),
            0);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 8, mr->lkey, 2,
                     address, remote_mr->rkey),
            0);
  // Two outstanding (not yet polled) fill a depth-2 send queue.
  EXPECT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 8, mr->lkey, 3,
                     address, remote_mr->rkey),
            ENOMEM);
  EXPECT_EQ(Poll(first_).wr_id, 1u);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 8, mr->lkey, 3,
                     address, remote_mr->rkey),
            0);
  EXPECT_EQ(Poll(first_).wr_id, 2u);
  EXPECT_EQ(Poll(first_).wr_id, 3u);
  // Four completions into a CQ of three, never polled: overrun.
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(PostRecv(first_, local.data(), 8, mr->lkey, 10 + i), 0);
  }
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 8, mr->lkey, 4,
                     address, remote_mr->rkey),
            0);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 8, mr->lkey, 5,
                     address, remote_mr->rkey),
            0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ibv_qp_attr error{};
  error.qp_state = IBV_QPS_ERR;  // flushes the two receives
  ASSERT_EQ(api_->modify_qp(first_.qp, &error, IBV_QP_STATE), 0);
  ibv_wc wc[8];
  EXPECT_EQ(api_->poll_cq(first_.cq, 8, wc), -1);
}

TEST_F(EmulatorTest, ResourcesInUseAreBusyAndHandlesAreChecked) {
  OpenBoth();
  char data[8];
  ibv_mr* mr = Register(first_, data, sizeof(data), kFullAccess);
  EXPECT_EQ(api_->dealloc_pd(first_.pd), EBUSY);
  EXPECT_EQ(api_->destroy_cq(first_.cq), EBUSY);
  EXPECT_EQ(api_->close_device(first_.context), EBUSY);
  EXPECT_EQ(api_->reg_mr(first_.pd, data, 8, IBV_ACCESS_REMOTE_WRITE),
            nullptr);  // remote write without local write
  ibv_qp_init_attr ud{};
  ud.qp_type = IBV_QPT_UD;
  ud.send_cq = ud.recv_cq = first_.cq;
  ud.cap.max_send_wr = ud.cap.max_recv_wr = 1;
  EXPECT_EQ(api_->create_qp(first_.pd, &ud), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_GT(mr->lkey, 0u);
  EXPECT_EQ(emulator_->QpNumbers("ib0"),
            std::vector<uint32_t>({first_.qp->qp_num}));
  EXPECT_EQ(api_->fork_init(), 0);
  EXPECT_EQ(emulator_->fork_init_calls(), 1);
}

TEST_F(EmulatorTest, FailedDeviceErrorsItsQpsAndDropsTraffic) {
  OpenBoth();
  PathOptions path;
  path.timeout = 4;
  path.retry_cnt = 1;
  Connect(path);
  char data[8] = "abc";
  ibv_mr* mr = Register(first_, data, sizeof(data), kFullAccess);
  ibv_mr* remote_mr = Register(second_, data, sizeof(data), kFullAccess);
  ASSERT_EQ(PostRecv(second_, data, 8, remote_mr->lkey, 5), 0);
  ASSERT_TRUE(emulator_->FailDevice("ib1").ok());
  EXPECT_EQ(Poll(second_).status, IBV_WC_WR_FLUSH_ERR);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, data, 8, mr->lkey, 1,
                     reinterpret_cast<uint64_t>(data), remote_mr->rkey),
            0);
  EXPECT_EQ(Poll(first_).status, IBV_WC_RETRY_EXC_ERR);
}


}  // namespace
}  // namespace emulator_test
}  // namespace verbs
}  // namespace oflite
