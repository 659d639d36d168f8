// Internal to the verbs emulator (emulator.h is the public face): the fabric
// state and the objects behind the rdma-core handles it hands out. Every
// member is guarded by Fabric::mutex_; the handles given to callers point at
// the rdma-core struct embedded in each object and are mapped back through the
// fabric's tables, so a stale or foreign handle is detected (EINVAL) rather
// than dereferenced.
#ifndef ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_FABRIC_H_
#define ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_FABRIC_H_

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "oneflow_lite/comm/verbs_emulator/emulator.h"
#include "oneflow_lite/comm/verbs_emulator/emulator_link.h"

namespace oflite {
namespace verbs {
namespace emulator {

using Clock = std::chrono::steady_clock;

constexpr int kGidTableLength = 6;
constexpr uint32_t kMaxQpRdAtomic = 16;
constexpr uint32_t kPsnMask = 0xffffff;
constexpr uint64_t kGuidBase = 0x0002c90300a00000ull;  // + device index

struct Device;
struct QueuePair;

// Local ACK timeout: 4.096 us << timeout (0 means wait forever).
inline Clock::duration TransportTimeout(uint8_t timeout) {
  return std::chrono::nanoseconds(4096ull << (timeout < 31 ? timeout : 31));
}

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
  // The first PSN of the last request this QP answered as a responder: a
  // packet repeating it (its ACK was lost between processes) is ACKed again.
  bool answered_any = false;
  uint32_t answered_psn = 0;
};

struct Device {
  ibv_device device{};
  EmulatedDeviceOptions options;
  int index = 0;
  int slot = 0;      // on a joined fabric: the claimed slot (index + 1)
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

// Where a work request's bytes are in the requester's memory: `segments`
// of process `pid` (0: this process, whose addresses are used directly).
struct RequesterMemory {
  pid_t pid = 0;
  std::vector<Segment> segments;
};

// One work request as it reaches a responder, from a QP of this process or
// off the link. Wire format: emulator_packet.h.
struct Packet {
  uint32_t qp_num = 0;  // the requester QP
  uint32_t dest_qp_num = 0;
  uint32_t psn = 0;
  ibv_ah_attr ah{};
  ibv_mtu path_mtu = IBV_MTU_256;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  uint64_t length = 0;
  uint64_t remote_address = 0;
  uint32_t rkey = 0;
  uint32_t imm_data = 0;
  bool has_imm = false;
  RequesterMemory memory;  // source (SEND, WRITE) or destination (READ)
  std::string inline_data;  // packets off the link only
};

// What the responder answers; the requester acts on it (Conclude).
enum class Outcome : uint8_t {
  kAck = 0,
  kDrop = 1,             // lost: retransmit after the ACK timeout
  kRnrNak = 2,           // no receive posted: retry after rnr_timer
  kRemoteAccess = 3,     // IBV_WC_REM_ACCESS_ERR
  kRemoteOperation = 4,  // IBV_WC_REM_OP_ERR
  kRemoteInvalid = 5,    // IBV_WC_REM_INV_REQ_ERR
  kRequesterFault = 6,   // the requester's memory could not be accessed
};
struct Response {
  Outcome outcome = Outcome::kDrop;
  uint8_t rnr_timer = 0;
};

// A packet for another process, sent by the engine without the fabric lock.
struct RemoteCall {
  std::pair<int, uint32_t> qp_key;  // key of the requester in qps_
  uint64_t sequence = 0;            // of the send-queue head it carries
  int slot = 0;
  std::string body;
  std::chrono::milliseconds wait{0};
  std::optional<std::string> reply;
};

// Copies `length` bytes between the requester's memory and `mine` (into the
// requester when `to_requester`), with process_vm_readv/writev when the
// requester is another process. False when its memory cannot be accessed.
bool MoveBytes(const RequesterMemory& requester,
               const std::vector<Segment>& mine, uint64_t length,
               bool to_requester);

class Fabric {
 public:
  Fabric();
  ~Fabric();

  // Makes this fabric one process's part of the cross-process fabric behind
  // `link` (VerbsEmulator::Join): devices added from now on claim a slot.
  void AttachLink(std::unique_ptr<Link> link);
  // The link's handler: one packet from process `sender` for `slot`.
  std::string HandleRemote(int slot, pid_t sender, const std::string& body);

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
  void ProcessHead(QueuePair* qp, Clock::time_point now,
                   std::vector<RemoteCall>* calls);
  Device* LocalTarget(const QueuePair& qp) const;
  QueuePair* Accepting(const Device& from, const Packet& packet,
                       Device* target) const;
  Response Respond(const Device& from, const Packet& packet, Device* target);
  Response Execute(const Packet& packet, QueuePair* responder);
  bool CheckLocal(const QueuePair& qp, const std::vector<ibv_sge>& sges,
                  bool need_local_write, std::vector<Segment>* segments) const;
  bool CheckRemote(const QueuePair& responder, const Packet& packet,
                   Segment* segment) const;
  void Conclude(QueuePair* qp, const Response& response, Clock::time_point now);
  void Acknowledge(QueuePair* qp);
  void Dropped(QueuePair* qp, Clock::time_point now);
  void FailHead(QueuePair* qp, ibv_wc_status status);
  void EnterError(QueuePair* qp);
  void FlushQueues(QueuePair* qp);
  void CompleteSend(QueuePair* qp, const SendRequest& request,
                    ibv_wc_status status);
  void CompleteRecv(QueuePair* qp, const RecvRequest& request,
                    ibv_wc_status status, const Packet* sender);
  void PushCompletion(CompletionQueue* cq, const CompletionEntry& entry);
  void PurgeCompletions(QueuePair* qp);

  // Cross-process part (emulator_remote.cc).
  bool MakeRemoteCall(const QueuePair& qp, const Packet& packet,
                      RemoteCall* call) const;
  void ExchangeCalls(std::unique_lock<std::mutex>* lock,
                     std::vector<RemoteCall>* calls);
  void ConcludeRemote(const RemoteCall& call, Clock::time_point now);
  Device* FindDeviceBySlot(int slot) const;

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
  // Set once by AttachLink before any device exists; Exchange is used by the
  // engine thread only (without mutex_), the handler runs on the link's.
  std::unique_ptr<Link> link_;
  std::thread engine_;  // last: started after every member is initialized
};

}  // namespace emulator
}  // namespace verbs
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_FABRIC_H_
