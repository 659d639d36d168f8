// The fixture shared by the verbs emulator's tests (verbs_emulator/): two
// emulated HCAs ("ib0", "ib1") on one fabric, helpers that open a device,
// create a PD/CQ/RC QP, drive the QP through INIT -> RTR -> RTS, register
// memory, post work and poll completions with a bound. Everything goes
// through the VerbsApi table exactly as the ibverbs provider uses it.
// Link target: //oneflow_lite/comm/testing:verbs_emulator_fixture (testonly).
#ifndef ONEFLOW_LITE_COMM_TESTING_VERBS_EMULATOR_FIXTURE_H_
#define ONEFLOW_LITE_COMM_TESTING_VERBS_EMULATOR_FIXTURE_H_

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/verbs_emulator/emulator.h"

namespace oflite {
namespace verbs {
namespace emulator_test {

constexpr int kFullAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_WRITE;

struct Node {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
  // The table this node's objects belong to; null: the fixture's api_
  // (a joined fabric gives each node its own emulator and table).
  const VerbsApi* api = nullptr;
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
  const VerbsApi* Api(const Node& node) const {
    return node.api != nullptr ? node.api : api_.get();
  }

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
        EXPECT_EQ(Api(*node)->destroy_qp(node->qp), 0);
      }
    }
    for (auto& [mr, api] : mrs_) {
      EXPECT_EQ(api->dereg_mr(mr), 0);
    }
    mrs_.clear();
    for (Node* node : {&first_, &second_}) {
      if (node->cq) {
        EXPECT_EQ(Api(*node)->destroy_cq(node->cq), 0);
      }
      if (node->pd) {
        EXPECT_EQ(Api(*node)->dealloc_pd(node->pd), 0);
      }
      if (node->context) {
        EXPECT_EQ(Api(*node)->close_device(node->context), 0);
      }
      *node = Node();
    }
  }

  ibv_device* DeviceNamed(const std::string& name,
                          const VerbsApi* api = nullptr) {
    if (api == nullptr) api = api_.get();
    int count = 0;
    ibv_device** list = api->get_device_list(&count);
    ibv_device* found = nullptr;
    for (int i = 0; i < count; ++i) {
      if (name == api->get_device_name(list[i])) found = list[i];
    }
    api->free_device_list(list);
    return found;
  }

  void Open(const std::string& name, Node* node, int queue_depth = 16,
            int cqe = 64) {
    const VerbsApi* api = Api(*node);
    ibv_device* device = DeviceNamed(name, api);
    ASSERT_NE(device, nullptr) << name;
    node->context = api->open_device(device);
    ASSERT_NE(node->context, nullptr);
    ASSERT_EQ(api->query_port(node->context, 1, &node->port), 0);
    node->pd = api->alloc_pd(node->context);
    ASSERT_NE(node->pd, nullptr);
    node->cq = api->create_cq(node->context, cqe, nullptr, nullptr, 0);
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
    node->qp = api->create_qp(node->pd, &init);
    ASSERT_NE(node->qp, nullptr);
  }

  int ToInit(Node* node, int access = kFullAccess) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = access;
    return Api(*node)->modify_qp(node->qp, &attr,
                                 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
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
      EXPECT_EQ(Api(remote)->query_gid(remote.context, 1, path.gid_index,
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
    return Api(*node)->modify_qp(node->qp, &attr, kRtsMask);
  }

  // Brings first_ and second_ to RTS, connected to each other.
  void Connect(const PathOptions& path = PathOptions()) {
    ASSERT_EQ(ToInit(&first_, path.qp_access), 0);
    ASSERT_EQ(ToInit(&second_, path.qp_access), 0);
    ibv_qp_attr a = RtrAttributes(first_, second_, path, path.send_psn);
    ibv_qp_attr b = RtrAttributes(second_, first_, path, path.send_psn);
    ASSERT_EQ(Api(first_)->modify_qp(first_.qp, &a, kRtrMask), 0);
    ASSERT_EQ(Api(second_)->modify_qp(second_.qp, &b, kRtrMask), 0);
    ASSERT_EQ(ToRts(&first_, path), 0);
    ASSERT_EQ(ToRts(&second_, path), 0);
  }

  void OpenBoth() {
    Open("ib0", &first_);
    Open("ib1", &second_);
  }

  ibv_mr* Register(const Node& node, void* data, size_t size, int access) {
    ibv_mr* mr = Api(node)->reg_mr(node.pd, data, size, access);
    EXPECT_NE(mr, nullptr);
    if (mr) mrs_.push_back({mr, Api(node)});
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
    return Api(node)->post_send(node.qp, &wr, &bad);
  }

  int PostRecv(const Node& node, void* data, uint32_t length, uint32_t lkey,
               uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uint64_t>(data), length, lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return Api(node)->post_recv(node.qp, &wr, &bad);
  }

  // Waits (bounded) for the next completion on `node`'s CQ.
  ibv_wc Poll(const Node& node, std::chrono::milliseconds timeout =
                                    std::chrono::milliseconds(5000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    ibv_wc wc{};
    while (std::chrono::steady_clock::now() < deadline) {
      int n = Api(node)->poll_cq(node.cq, 1, &wc);
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
    return Api(node)->poll_cq(node.cq, 1, &wc) == 0;
  }

  ibv_qp_state State(const Node& node) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    EXPECT_EQ(Api(node)->query_qp(node.qp, &attr, IBV_QP_STATE, &init), 0);
    return attr.qp_state;
  }

  std::shared_ptr<VerbsEmulator> emulator_;
  std::shared_ptr<const VerbsApi> api_;
  Node first_, second_;
  std::vector<std::pair<ibv_mr*, const VerbsApi*>> mrs_;
};

}  // namespace emulator_test
}  // namespace verbs
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TESTING_VERBS_EMULATOR_FIXTURE_H_
