// Internal to the verbs emulator (emulator.h is the public face): the fabric
// state and the objects behind the rdma-core handles it hands out. Every
// member is guarded by Fabric::mutex_; the handles given to callers point at
// the rdma-core struct embedded in each object and are mapped back through the
// fabric's tables, so a stale or foreign handle is detected (EINVAL) rather
// than dereferenced.
#ifndef ONEFLOW_LITE_COMM_VERBS_EMULATOR_FABRIC_H_
#define ONEFLOW_LITE_COMM_VERBS_EMULATOR_FABRIC_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "oneflow_lite/comm/verbs/emulator.h"

namespace oflite {
namespace verbs {
namespace emulator {

using Clock = std::chrono::steady_clock;

constexpr int kGidTableLength = 6;
constexpr uint32_t kMaxQpRdAtomic = 16;
constexpr uint32_t kPsnMask = 0xffffff;

struct Device;
struct QueuePair;

struct Context {
  ibv_context context{};
  Device* device = nullptr;
  int users = 0;  // PDs and CQs
};

struct ProtectionDomain {
  ibv_pd pd{};
  Context* owner = nullptr;
  int users = 0;  // MRs and QPs
};

struct MemoryRegion {
  ibv_mr mr{};
  ProtectionDomain* pd = nullptr;
  int access = 0;
};

struct CompletionEntry {
  ibv_wc wc{};
  QueuePair* qp = nullptr;
  uint64_t sequence = 0;
  bool is_send = false;
};

struct CompletionChannel {
  ibv_comp_channel channel{};
  Context* owner = nullptr;
  int write_fd = -1;  // channel.fd is the read end of a pipe
  std::deque<ibv_cq*> events;  // one pipe byte per event
  int users = 0;               // CQs
};

struct CompletionQueue {
  ibv_cq cq{};
  Context* owner = nullptr;
  CompletionChannel* channel = nullptr;
  bool armed = false;
  uint64_t events_delivered = 0;
  uint64_t events_acked = 0;
  size_t capacity = 0;
  std::deque<CompletionEntry> entries;
  bool overrun = false;
  int users = 0;  // QPs
};

struct SendRequest {
  uint64_t sequence = 0;
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  bool signaled = false;
  std::vector<ibv_sge> sges;
  bool is_inline = false;
  std::string inline_data;
  uint64_t length = 0;
  uint64_t remote_address = 0;
  uint32_t rkey = 0;
  uint32_t imm_data = 0;  // network byte order, passed through untouched
  bool has_imm = false;
};

struct RecvRequest {
  uint64_t sequence = 0;
  uint64_t wr_id = 0;
  std::vector<ibv_sge> sges;
};

struct QueuePair {
  ibv_qp qp{};
  Device* device = nullptr;
  ProtectionDomain* pd = nullptr;
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  ibv_qp_cap cap{};
  bool signal_all = false;
  ibv_qp_attr attr{};  // current attributes, attr.qp_state included

  std::deque<SendRequest> send_queue;
  std::deque<RecvRequest> recv_queue;
  uint64_t next_send_sequence = 0;
  uint64_t send_retired = 0;  // sequences below it have freed their slot
  uint64_t next_recv_sequence = 0;
  uint64_t recv_retired = 0;
  uint32_t next_send_psn = 0;
  uint32_t expected_recv_psn = 0;
  int transport_retries = 0;
  int rnr_retries = 0;
  Clock::time_point retry_at{};
};

struct Device {
  ibv_device device{};
  EmulatedDeviceOptions options;
  int index = 0;
  uint16_t lid = 0;  // 0 on Ethernet
  ibv_gid gids[kGidTableLength]{};
  ibv_gid_type gid_types[kGidTableLength]{};
  uint64_t guid = 0;
  bool failed = false;
  int open_contexts = 0;
  uint32_t next_qp_num = 0;
  uint32_t next_key = 0;
  std::map<uint32_t, MemoryRegion*> mrs;  // by lkey (== rkey)
  std::map<uint32_t, QueuePair*> qps;     // by QP number
};

// A contiguous piece of host memory taking part in a copy.
struct Segment {
  uint8_t* address;
  uint64_t length;
};

class Fabric {
 public:
  Fabric();
  ~Fabric();

  Status AddDevice(const EmulatedDeviceOptions& options);
  std::shared_ptr<VerbsApi> MakeApi(const std::vector<std::string>& visible);
  Status InjectQpError(const std::string& device, uint32_t qp_num);
  Status FailDevice(const std::string& device);
  std::vector<uint32_t> QpNumbers(const std::string& device) const;
  int fork_init_calls() const;

 private:
  // Control path (emulator.cc).
  ibv_device** GetDeviceList(const std::vector<std::string>& visible,
                             int* num_devices);
  ibv_context* OpenDevice(ibv_device* device);
  int CloseDevice(ibv_context* context);
  int QueryDevice(ibv_context* context, ibv_device_attr* attr);
  int QueryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int QueryGid(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  int QueryGidType(ibv_context* context, uint8_t port, int index,
                   ibv_gid_type* type);
  ibv_pd* AllocPd(ibv_context* context);
  int DeallocPd(ibv_pd* pd);
  ibv_mr* RegMr(ibv_pd* pd, void* address, size_t length, int access);
  int DeregMr(ibv_mr* mr);
  ibv_cq* CreateCq(ibv_context* context, int cqe, void* cq_context,
                   ibv_comp_channel* channel);
  int DestroyCq(ibv_cq* cq);
  ibv_comp_channel* CreateCompChannel(ibv_context* context);
  int DestroyCompChannel(ibv_comp_channel* channel);
  int ReqNotifyCq(ibv_cq* cq);
  int GetCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context);
  void AckCqEvents(ibv_cq* cq, unsigned int count);
  ibv_qp* CreateQp(ibv_pd* pd, ibv_qp_init_attr* attr);
  int DestroyQp(ibv_qp* qp);
  int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int QueryQp(ibv_qp* qp, ibv_qp_attr* attr, ibv_qp_init_attr* init_attr);
  int ValidateQpAttributes(const QueuePair& qp, const ibv_qp_attr& attr,
                           int mask) const;
  void ApplyQpAttributes(QueuePair* qp, const ibv_qp_attr& attr, int mask);
  void ResetQp(QueuePair* qp);
  Device* FindDevice(const std::string& name) const;

  // Data path (emulator_engine.cc).
  int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
  int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
  int PollCq(ibv_cq* cq, int num_entries, ibv_wc* wc);
  int AcceptSend(QueuePair* qp, const ibv_send_wr& wr);
  void RunEngine();
  void ProcessHead(QueuePair* qp, Clock::time_point now);
  QueuePair* Route(QueuePair* qp) const;
  bool CheckLocal(const QueuePair& qp, const std::vector<ibv_sge>& sges,
                  bool need_local_write, std::vector<Segment>* segments) const;
  bool CheckRemote(const QueuePair& responder, const SendRequest& request,
                   Segment* segment) const;
  void Deliver(QueuePair* qp, QueuePair* responder,
               const std::vector<Segment>& local, const Segment& remote,
               const std::vector<Segment>& receive);
  void FailHead(QueuePair* qp, ibv_wc_status status);
  void EnterError(QueuePair* qp);
  void FlushQueues(QueuePair* qp);
  void CompleteSend(QueuePair* qp, const SendRequest& request,
                    ibv_wc_status status);
  void CompleteRecv(QueuePair* qp, const RecvRequest& request,
                    ibv_wc_status status, const SendRequest* sender,
                    uint32_t source_qp);
  void PushCompletion(CompletionQueue* cq, const CompletionEntry& entry);
  void PurgeCompletions(QueuePair* qp);

  template <typename Handle, typename Object>
  static Object* Lookup(
      const std::unordered_map<Handle*, std::unique_ptr<Object>>& table,
      Handle* handle) {
    auto it = table.find(handle);
    return it == table.end() ? nullptr : it->second.get();
  }

  mutable std::mutex mutex_;
  std::condition_variable work_;
  bool stopping_ = false;
  int fork_init_calls_ = 0;
  std::vector<std::unique_ptr<Device>> devices_;
  std::unordered_map<ibv_context*, std::unique_ptr<Context>> contexts_;
  std::unordered_map<ibv_pd*, std::unique_ptr<ProtectionDomain>> pds_;
  std::unordered_map<ibv_mr*, std::unique_ptr<MemoryRegion>> mrs_;
  std::unordered_map<ibv_cq*, std::unique_ptr<CompletionQueue>> cqs_;
  std::unordered_map<ibv_comp_channel*, std::unique_ptr<CompletionChannel>>
      channels_;
  // Ordered by QP number so that the engine serves QPs deterministically.
  std::map<std::pair<int, uint32_t>, std::unique_ptr<QueuePair>> qps_;
  std::unordered_map<ibv_qp*, QueuePair*> qp_handles_;
  std::thread engine_;  // last: started after every member is initialized
};

}  // namespace emulator
}  // namespace verbs
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_VERBS_EMULATOR_FABRIC_H_
