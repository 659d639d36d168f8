// Each hardware behaviour the emulator promises (emulator.h), proven through
// the VerbsApi table exactly as the ibverbs provider uses it.
#include "oneflow_lite/comm/verbs/emulator.h"

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace oflite {
namespace verbs {
namespace {

constexpr int kFullAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_WRITE;

struct Node {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
};

struct PathOptions {
  int gid_index = -1;  // -1: LID addressing without GRH
  ibv_mtu mtu = IBV_MTU_1024;
  uint32_t send_psn = 100;  // this side's SQ PSN; the peer's RQ PSN
  uint8_t timeout = 8;      // ~1 ms
  uint8_t retry_cnt = 2;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  int qp_access = kFullAccess;
};

class EmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emulator_ = VerbsEmulator::Create();
    EmulatedDeviceOptions a;
    a.name = "ib0";
    EmulatedDeviceOptions b = a;
    b.name = "ib1";
    ASSERT_TRUE(emulator_->AddDevice(a).ok());
    ASSERT_TRUE(emulator_->AddDevice(b).ok());
    api_ = emulator_->Api();
  }

  void TearDown() override {
    for (Node* node : {&first_, &second_}) {
      if (node->qp) {
        EXPECT_EQ(api_->destroy_qp(node->qp), 0);
      }
    }
    for (ibv_mr* mr : mrs_) {
      EXPECT_EQ(api_->dereg_mr(mr), 0);
    }
    mrs_.clear();
    for (Node* node : {&first_, &second_}) {
      if (node->cq) {
        EXPECT_EQ(api_->destroy_cq(node->cq), 0);
      }
      if (node->pd) {
        EXPECT_EQ(api_->dealloc_pd(node->pd), 0);
      }
      if (node->context) {
        EXPECT_EQ(api_->close_device(node->context), 0);
      }
      *node = Node();
    }
  }

  ibv_device* DeviceNamed(const std::string& name) {
    int count = 0;
    ibv_device** list = api_->get_device_list(&count);
    ibv_device* found = nullptr;
    for (int i = 0; i < count; ++i) {
      if (name == api_->get_device_name(list[i])) found = list[i];
    }
    api_->free_device_list(list);
    return found;
  }

  void Open(const std::string& name, Node* node, int queue_depth = 16,
            int cqe = 64) {
    ibv_device* device = DeviceNamed(name);
    ASSERT_NE(device, nullptr) << name;
    node->context = api_->open_device(device);
    ASSERT_NE(node->context, nullptr);
    ASSERT_EQ(api_->query_port(node->context, 1, &node->port), 0);
    node->pd = api_->alloc_pd(node->context);
    ASSERT_NE(node->pd, nullptr);
    node->cq = api_->create_cq(node->context, cqe, nullptr, nullptr, 0);
    ASSERT_NE(node->cq, nullptr);
    ibv_qp_init_attr init{};
    init.send_cq = node->cq;
    init.recv_cq = node->cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = queue_depth;
    init.cap.max_recv_wr = queue_depth;
    init.cap.max_send_sge = 2;
    init.cap.max_recv_sge = 2;
    init.cap.max_inline_data = 64;
    node->qp = api_->create_qp(node->pd, &init);
    ASSERT_NE(node->qp, nullptr);
  }

  int ToInit(Node* node, int access = kFullAccess) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = access;
    return api_->modify_qp(node->qp, &attr,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                               IBV_QP_ACCESS_FLAGS);
  }

  ibv_qp_attr RtrAttributes(const Node& local, const Node& remote,
                            const PathOptions& path,
                            uint32_t remote_send_psn) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = path.mtu;
    attr.dest_qp_num = remote.qp->qp_num;
    attr.rq_psn = remote_send_psn;
    attr.max_dest_rd_atomic = 4;
    attr.min_rnr_timer = path.min_rnr_timer;
    attr.ah_attr.port_num = 1;
    attr.ah_attr.dlid = remote.port.lid;
    if (path.gid_index >= 0) {
      ibv_gid remote_gid{};
      EXPECT_EQ(api_->query_gid(remote.context, 1, path.gid_index,
                                &remote_gid),
                0);
      attr.ah_attr.is_global = 1;
      attr.ah_attr.grh.dgid = remote_gid;
      attr.ah_attr.grh.sgid_index = path.gid_index;
      attr.ah_attr.grh.hop_limit = 1;
    }
    return attr;
  }

  static constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC |
                                  IBV_QP_MIN_RNR_TIMER;
  static constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT |
                                  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

  int ToRts(Node* node, const PathOptions& path) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = path.timeout;
    attr.retry_cnt = path.retry_cnt;
    attr.rnr_retry = path.rnr_retry;
    attr.sq_psn = path.send_psn;
    attr.max_rd_atomic = 4;
    return api_->modify_qp(node->qp, &attr, kRtsMask);
  }

  // Brings first_ and second_ to RTS, connected to each other.
  void Connect(const PathOptions& path = PathOptions()) {
    ASSERT_EQ(ToInit(&first_, path.qp_access), 0);
    ASSERT_EQ(ToInit(&second_, path.qp_access), 0);
    ibv_qp_attr a = RtrAttributes(first_, second_, path, path.send_psn);
    ibv_qp_attr b = RtrAttributes(second_, first_, path, path.send_psn);
    ASSERT_EQ(api_->modify_qp(first_.qp, &a, kRtrMask), 0);
    ASSERT_EQ(api_->modify_qp(second_.qp, &b, kRtrMask), 0);
    ASSERT_EQ(ToRts(&first_, path), 0);
    ASSERT_EQ(ToRts(&second_, path), 0);
  }

  void OpenBoth() {
    Open("ib0", &first_);
    Open("ib1", &second_);
  }

  ibv_mr* Register(const Node& node, void* data, size_t size, int access) {
    ibv_mr* mr = api_->reg_mr(node.pd, data, size, access);
    EXPECT_NE(mr, nullptr);
    if (mr) mrs_.push_back(mr);
    return mr;
  }

  int PostSend(const Node& node, ibv_wr_opcode opcode, void* data,
               uint32_t length, uint32_t lkey, uint64_t wr_id,
               uint64_t remote_address = 0, uint32_t rkey = 0,
               uint32_t imm = 0) {
    ibv_sge sge{reinterpret_cast<uint64_t>(data), length, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = imm;
    wr.wr.rdma.remote_addr = remote_address;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return api_->post_send(node.qp, &wr, &bad);
  }

  int PostRecv(const Node& node, void* data, uint32_t length, uint32_t lkey,
               uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uint64_t>(data), length, lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return api_->post_recv(node.qp, &wr, &bad);
  }

  // Waits (bounded) for the next completion on `node`'s CQ.
  ibv_wc Poll(const Node& node, std::chrono::milliseconds timeout =
                                    std::chrono::milliseconds(5000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    ibv_wc wc{};
    while (std::chrono::steady_clock::now() < deadline) {
      int n = api_->poll_cq(node.cq, 1, &wc);
      EXPECT_GE(n, 0);
      if (n == 1) return wc;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    ADD_FAILURE() << "no completion within " << timeout.count() << " ms";
    wc.status = IBV_WC_GENERAL_ERR;
    return wc;
  }

  bool NoCompletionFor(const Node& node, std::chrono::milliseconds wait) {
    std::this_thread::sleep_for(wait);
    ibv_wc wc{};
    return api_->poll_cq(node.cq, 1, &wc) == 0;
  }

  ibv_qp_state State(const Node& node) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    EXPECT_EQ(api_->query_qp(node.qp, &attr, IBV_QP_STATE, &init), 0);
    return attr.qp_state;
  }

  std::shared_ptr<VerbsEmulator> emulator_;
  std::shared_ptr<const VerbsApi> api_;
  Node first_, second_;
  std::vector<ibv_mr*> mrs_;
};

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
  ASSERT_EQ(only_roce->query_gid(context, 1, 1, &gid), 0);
  // ::ffff:10.0.0.3 (third device of the fabric).
  const uint8_t expected[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                0, 0, 0xff, 0xff, 10, 0, 0, 3};
  EXPECT_EQ(std::memcmp(gid.raw, expected, 16), 0);
  ASSERT_EQ(only_roce->query_gid(context, 1, 0, &gid), 0);
  EXPECT_EQ(gid.raw[0], 0xfe);
  EXPECT_EQ(gid.raw[1], 0x80);
  EXPECT_EQ(only_roce->query_gid(context, 1, 4, &gid), EINVAL);
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
  gid_path.gid_index = 1;  // RoCE v2
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
}  // namespace verbs
}  // namespace oflite
