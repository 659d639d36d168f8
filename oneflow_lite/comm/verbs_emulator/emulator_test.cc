// The emulator's devices, state machine and successful data path: SEND/RECV,
// RDMA READ/WRITE/WRITE_WITH_IMM, inline sends, RoCE addressing.
#include "oneflow_lite/comm/verbs_emulator/emulator.h"

#include <poll.h>

#include <algorithm>

#include "oneflow_lite/comm/testing/verbs_emulator_fixture.h"

namespace oflite {
namespace verbs {
namespace emulator_test {
namespace {

TEST_F(EmulatorTest, ListsDevicesPortsAndGidTables) {
  EXPECT_EQ(api_->implementation, "emulator");
  EmulatedDeviceOptions roce;
  roce.name = "roce0";
  roce.link_layer = LinkLayer::kEthernet;
  roce.active_mtu = IBV_MTU_1024;
  ASSERT_TRUE(emulator_->AddDevice(roce).ok());
  EXPECT_EQ(emulator_->AddDevice(roce).code(), StatusCode::kAlreadyExists);

  auto only_roce = emulator_->Api({"roce0"});
  int count = 0;
  ibv_device** list = only_roce->get_device_list(&count);
  ASSERT_EQ(count, 1);
  EXPECT_STREQ(only_roce->get_device_name(list[0]), "roce0");
  EXPECT_EQ(list[1], nullptr);
  ibv_context* context = only_roce->open_device(list[0]);
  only_roce->free_device_list(list);
  ASSERT_NE(context, nullptr);
  ibv_port_attr port{};
  ASSERT_EQ(only_roce->query_port(context, 1, &port), 0);
  EXPECT_EQ(port.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(port.active_mtu, IBV_MTU_1024);
  EXPECT_EQ(port.lid, 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(only_roce->query_port(context, 2, &port), EINVAL);
  ibv_gid gid{};
  // ::ffff:10.0.0.3 (third device of the fabric) as RoCE v1 and v2.
  const uint8_t expected[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                0, 0, 0xff, 0xff, 10, 0, 0, 3};
  for (int index : {2, 3}) {
    ASSERT_EQ(only_roce->query_gid(context, 1, index, &gid), 0);
    EXPECT_EQ(std::memcmp(gid.raw, expected, 16), 0);
  }
  ASSERT_EQ(only_roce->query_gid(context, 1, 0, &gid), 0);
  EXPECT_EQ(gid.raw[0], 0xfe);
  EXPECT_EQ(gid.raw[1], 0x80);
  ibv_gid_type type;
  const ibv_gid_type kTypes[4] = {IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2,
                                  IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2};
  for (int index = 0; index < 4; ++index) {
    ASSERT_EQ(only_roce->query_gid_type(context, 1, index, &type), 0);
    EXPECT_EQ(type, kTypes[index]) << index;
  }
  EXPECT_EQ(only_roce->query_gid_type(context, 1, 4, &type), EINVAL);  // empty
  ASSERT_EQ(only_roce->query_gid(context, 1, 5, &gid), 0);
  EXPECT_EQ(gid.raw[0], 0);
  EXPECT_EQ(only_roce->query_gid(context, 1, 6, &gid), EINVAL);
  EXPECT_EQ(only_roce->close_device(context), 0);

  Open("ib1", &second_);
  EXPECT_EQ(second_.port.link_layer, IBV_LINK_LAYER_INFINIBAND);
  EXPECT_EQ(second_.port.lid, 2);
  EXPECT_EQ(second_.port.active_mtu, IBV_MTU_4096);
}

TEST_F(EmulatorTest, StateMachineRefusesPostsAndValidatesMasks) {
  OpenBoth();
  char buffer[64] = {};
  ibv_mr* mr = Register(first_, buffer, sizeof(buffer), kFullAccess);
  // RESET: neither queue accepts work.
  EXPECT_EQ(PostSend(first_, IBV_WR_SEND, buffer, 8, mr->lkey, 1), EINVAL);
  EXPECT_EQ(PostRecv(first_, buffer, 8, mr->lkey, 1), EINVAL);
  // Skipping INIT, or a transition without its required attributes.
  PathOptions path;
  ibv_qp_attr rtr = RtrAttributes(first_, second_, path, 0);
  EXPECT_EQ(api_->modify_qp(first_.qp, &rtr, kRtrMask), EINVAL);
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.port_num = 1;
  EXPECT_EQ(api_->modify_qp(first_.qp, &init, IBV_QP_STATE | IBV_QP_PORT),
            EINVAL);
  ASSERT_EQ(ToInit(&first_), 0);
  EXPECT_EQ(State(first_), IBV_QPS_INIT);
  // INIT: receives may be posted, sends may not.
  EXPECT_EQ(PostRecv(first_, buffer, 8, mr->lkey, 2), 0);
  EXPECT_EQ(PostSend(first_, IBV_WR_SEND, buffer, 8, mr->lkey, 3), EINVAL);
  // RTR with a forbidden extra attribute, then with a path MTU above the port's.
  EXPECT_EQ(api_->modify_qp(first_.qp, &rtr, kRtrMask | IBV_QP_SQ_PSN),
            EINVAL);
  rtr.path_mtu = static_cast<ibv_mtu>(IBV_MTU_4096 + 1);
  EXPECT_EQ(api_->modify_qp(first_.qp, &rtr, kRtrMask), EINVAL);
  rtr.path_mtu = IBV_MTU_4096;
  // A GRH naming an empty source GID entry.
  ibv_qp_attr bad_gid = rtr;
  bad_gid.ah_attr.is_global = 1;
  bad_gid.ah_attr.grh.sgid_index = 2;
  EXPECT_EQ(api_->modify_qp(first_.qp, &bad_gid, kRtrMask), EINVAL);
  ASSERT_EQ(api_->modify_qp(first_.qp, &rtr, kRtrMask), 0);
  EXPECT_EQ(State(first_), IBV_QPS_RTR);
  EXPECT_EQ(PostSend(first_, IBV_WR_SEND, buffer, 8, mr->lkey, 4), EINVAL);
  // RTS is missing its RNR retry count.
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = 8;
  rts.retry_cnt = 1;
  rts.max_rd_atomic = 1;
  EXPECT_EQ(api_->modify_qp(first_.qp, &rts, kRtsMask & ~IBV_QP_RNR_RETRY),
            EINVAL);
  ASSERT_EQ(ToRts(&first_, path), 0);
  EXPECT_EQ(State(first_), IBV_QPS_RTS);
  // Back to RESET discards the queued receive without a completion.
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(api_->modify_qp(first_.qp, &reset, IBV_QP_STATE), 0);
  EXPECT_TRUE(NoCompletionFor(first_, std::chrono::milliseconds(5)));
  EXPECT_EQ(PostRecv(first_, buffer, 8, mr->lkey, 5), EINVAL);
}

TEST_F(EmulatorTest, RoceRequiresGlobalRouting) {
  EmulatedDeviceOptions roce;
  roce.name = "roce0";
  roce.link_layer = LinkLayer::kEthernet;
  ASSERT_TRUE(emulator_->AddDevice(roce).ok());
  roce.name = "roce1";
  ASSERT_TRUE(emulator_->AddDevice(roce).ok());
  Open("roce0", &first_);
  Open("roce1", &second_);
  ASSERT_EQ(ToInit(&first_), 0);
  PathOptions lid_path;  // no GRH: invalid on Ethernet
  ibv_qp_attr rtr = RtrAttributes(first_, second_, lid_path, 0);
  rtr.ah_attr.dlid = 7;
  EXPECT_EQ(api_->modify_qp(first_.qp, &rtr, kRtrMask), EINVAL);
  ASSERT_EQ(ibv_qp_state(IBV_QPS_INIT), State(first_));
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(api_->modify_qp(first_.qp, &reset, IBV_QP_STATE), 0);

  PathOptions gid_path;
  gid_path.gid_index = 3;  // RoCE v2, IPv4-mapped
  Connect(gid_path);
  std::vector<char> source(3000, 'r'), target(3000, 0);
  ibv_mr* source_mr = Register(first_, source.data(), source.size(),
                               kFullAccess);
  ibv_mr* target_mr = Register(second_, target.data(), target.size(),
                               kFullAccess);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, source.data(), 3000,
                     source_mr->lkey, 9,
                     reinterpret_cast<uint64_t>(target.data()),
                     target_mr->rkey),
            0);
  ibv_wc wc = Poll(first_);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStatusName(wc.status);
  EXPECT_EQ(target, source);
}

TEST_F(EmulatorTest, SendReceiveOverSizesAndScatterLists) {
  OpenBoth();
  Connect();
  for (uint32_t size : {0u, 1u, 4097u, 65536u}) {
    std::vector<uint8_t> source(size + 1), target(size + 9, 0xee);
    for (uint32_t i = 0; i < size; ++i) source[i] = uint8_t(i * 7 + size);
    ibv_mr* source_mr = Register(first_, source.data(), source.size(),
                                 kFullAccess);
    ibv_mr* target_mr = Register(second_, target.data(), target.size(),
                                 IBV_ACCESS_LOCAL_WRITE);
    // Receive into two pieces: [0, 5) and [8, size + 9).
    ibv_sge sges[2] = {
        {reinterpret_cast<uint64_t>(target.data()), 5, target_mr->lkey},
        {reinterpret_cast<uint64_t>(target.data() + 8), size + 1,
         target_mr->lkey}};
    ibv_recv_wr recv{};
    recv.wr_id = 1000 + size;
    recv.sg_list = sges;
    recv.num_sge = 2;
    ibv_recv_wr* bad_recv = nullptr;
    ASSERT_EQ(api_->post_recv(second_.qp, &recv, &bad_recv), 0);
    ASSERT_EQ(PostSend(first_, IBV_WR_SEND, source.data(), size,
                       source_mr->lkey, 2000 + size),
              0);
    ibv_wc sent = Poll(first_);
    EXPECT_EQ(sent.status, IBV_WC_SUCCESS) << WcStatusName(sent.status);
    EXPECT_EQ(sent.opcode, IBV_WC_SEND);
    EXPECT_EQ(sent.wr_id, 2000 + size);
    ibv_wc received = Poll(second_);
    EXPECT_EQ(received.status, IBV_WC_SUCCESS);
    EXPECT_EQ(received.opcode, IBV_WC_RECV);
    EXPECT_EQ(received.wr_id, 1000 + size);
    EXPECT_EQ(received.byte_len, size);
    EXPECT_EQ(received.src_qp, first_.qp->qp_num);
    EXPECT_EQ(received.wc_flags & IBV_WC_WITH_IMM, 0);
    for (uint32_t i = 0; i < size; ++i) {
      size_t at = i < 5 ? i : i + 3;
      ASSERT_EQ(target[at], source[i]) << "size " << size << " byte " << i;
    }
    EXPECT_EQ(target[5], 0xee);  // the gap between the pieces is untouched
  }
}

TEST_F(EmulatorTest, RdmaWriteReadAndWriteWithImmediate) {
  OpenBoth();
  Connect();
  std::vector<uint8_t> local(4099), remote(4099);
  for (size_t i = 0; i < remote.size(); ++i) {
    local[i] = uint8_t(i);
    remote[i] = uint8_t(255 - i % 251);
  }
  std::vector<uint8_t> remote_before = remote;
  ibv_mr* local_mr = Register(first_, local.data(), local.size(), kFullAccess);
  ibv_mr* remote_mr = Register(second_, remote.data(), remote.size(),
                               kFullAccess);
  uint64_t remote_address = reinterpret_cast<uint64_t>(remote.data());
  // READ 1001 bytes from remote offset 3 into local offset 10.
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_READ, local.data() + 10, 1001,
                     local_mr->lkey, 1, remote_address + 3, remote_mr->rkey),
            0);
  ibv_wc wc = Poll(first_);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << WcStatusName(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, 1001u);
  EXPECT_EQ(std::memcmp(local.data() + 10, remote.data() + 3, 1001), 0);
  EXPECT_EQ(local[9], 9);
  EXPECT_EQ(local[1011], uint8_t(1011));
  // WRITE 1 byte, then WRITE_WITH_IMM 17 bytes which consumes a receive.
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, local.data(), 1,
                     local_mr->lkey, 2, remote_address + 4098,
                     remote_mr->rkey),
            0);
  wc = Poll(first_);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(remote[4098], local[0]);
  ASSERT_EQ(PostRecv(second_, nullptr, 0, 0, 77), 0);
  ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE_WITH_IMM, local.data() + 100,
                     17, local_mr->lkey, 3, remote_address + 50,
                     remote_mr->rkey, htonl(0xabcd1234)),
            0);
  wc = Poll(first_);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ibv_wc received = Poll(second_);
  EXPECT_EQ(received.status, IBV_WC_SUCCESS);
  EXPECT_EQ(received.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(received.wr_id, 77u);
  EXPECT_EQ(received.byte_len, 17u);
  EXPECT_TRUE(received.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(received.imm_data), 0xabcd1234u);
  EXPECT_EQ(std::memcmp(remote.data() + 50, local.data() + 100, 17), 0);
  EXPECT_EQ(remote[49], remote_before[49]);
  EXPECT_EQ(remote[67], remote_before[67]);
}


TEST_F(EmulatorTest, InlineSendIgnoresLkeyAndSendCarriesImmediate) {
  OpenBoth();
  Connect();
  char inbox[64] = {};
  ibv_mr* inbox_mr = Register(second_, inbox, sizeof(inbox), kFullAccess);
  ASSERT_EQ(PostRecv(second_, inbox, sizeof(inbox), inbox_mr->lkey, 9), 0);
  char message[80] = "inline!";
  ibv_sge sge{reinterpret_cast<uint64_t>(message), 8, /*lkey=*/0xdead};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(42);
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(api_->post_send(first_.qp, &wr, &bad), 0);
  std::strcpy(message, "changed");  // inline data was copied at post time
  EXPECT_EQ(Poll(first_).status, IBV_WC_SUCCESS);
  ibv_wc received = Poll(second_);
  EXPECT_EQ(received.status, IBV_WC_SUCCESS);
  EXPECT_EQ(received.opcode, IBV_WC_RECV);
  EXPECT_TRUE(received.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(received.imm_data), 42u);
  EXPECT_STREQ(inbox, "inline!");
  sge.length = 65;  // above the QP's max_inline_data of 64
  EXPECT_EQ(api_->post_send(first_.qp, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
}


TEST_F(EmulatorTest, CompletionChannelSignalsArmedQueuesOnce) {
  Open("ib0", &first_);
  Open("ib1", &second_);
  ibv_comp_channel* channel = api_->create_comp_channel(first_.context);
  ASSERT_NE(channel, nullptr);
  ibv_cq* cq = api_->create_cq(first_.context, 8, this, channel, 0);
  ASSERT_NE(cq, nullptr);
  // Rebuild first_'s QP on the event-driven CQ.
  ASSERT_EQ(api_->destroy_qp(first_.qp), 0);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  first_.qp = api_->create_qp(first_.pd, &init);
  ASSERT_NE(first_.qp, nullptr);
  Connect();
  char data[8] = "x";
  ibv_mr* mr = Register(first_, data, sizeof(data), kFullAccess);
  ibv_mr* remote_mr = Register(second_, data, sizeof(data), kFullAccess);
  auto readable = [&](int timeout_ms) {
    pollfd descriptor{channel->fd, POLLIN, 0};
    return ::poll(&descriptor, 1, timeout_ms) == 1;
  };
  auto write_once = [&](uint64_t id) {
    ASSERT_EQ(PostSend(first_, IBV_WR_RDMA_WRITE, data, 8, mr->lkey, id,
                       reinterpret_cast<uint64_t>(data), remote_mr->rkey),
              0);
  };
  // Not armed: a completion arrives, no event.
  write_once(1);
  ibv_wc wc{};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (api_->poll_cq(cq, 1, &wc) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_FALSE(readable(20));
  // Armed: exactly one event for the next completions.
  ASSERT_EQ(api_->req_notify_cq(cq, 0), 0);
  write_once(2);
  write_once(3);
  ASSERT_TRUE(readable(5000));
  ibv_cq* event_cq = nullptr;
  void* event_context = nullptr;
  ASSERT_EQ(api_->get_cq_event(channel, &event_cq, &event_context), 0);
  EXPECT_EQ(event_cq, cq);
  EXPECT_EQ(event_context, this);
  EXPECT_FALSE(readable(20));
  ibv_wc both[2];
  int polled = 0;
  while (polled < 2 && std::chrono::steady_clock::now() < deadline) {
    polled += std::max(0, api_->poll_cq(cq, 2 - polled, both + polled));
  }
  EXPECT_EQ(polled, 2);
  // Unacked events keep the CQ (and so the channel) alive.
  ASSERT_EQ(api_->destroy_qp(first_.qp), 0);
  first_.qp = nullptr;
  EXPECT_EQ(api_->destroy_cq(cq), EBUSY);
  EXPECT_EQ(api_->destroy_comp_channel(channel), EBUSY);
  api_->ack_cq_events(cq, 1);
  EXPECT_EQ(api_->destroy_cq(cq), 0);
  EXPECT_EQ(api_->destroy_comp_channel(channel), 0);
}

}  // namespace
}  // namespace emulator_test
}  // namespace verbs
}  // namespace oflite
