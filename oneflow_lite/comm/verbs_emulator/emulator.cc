// The verbs emulator's control path: devices, contexts, PDs, MRs, CQs, QP
// creation and the RC state machine. The data path is emulator_engine.cc.
#include "oneflow_lite/comm/verbs_emulator/emulator.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "oneflow_lite/comm/verbs_emulator/emulator_fabric.h"

namespace oflite {
namespace verbs {
namespace emulator {
namespace {

// What the IB specification requires and allows in the attribute mask of an
// RC QP transition (besides IBV_QP_STATE).
struct TransitionRule {
  ibv_qp_state from;
  ibv_qp_state to;
  int required;
  int optional;
};

constexpr int kRtrRequired = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                             IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsRequired = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                             IBV_QP_MAX_QP_RD_ATOMIC;
constexpr int kRtsOptional = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
                             IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
                             IBV_QP_PATH_MIG_STATE;

const TransitionRule kRules[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT,
     IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, 0,
     IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {IBV_QPS_INIT, IBV_QPS_RTR, kRtrRequired,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {IBV_QPS_RTR, IBV_QPS_RTS, kRtsRequired, kRtsOptional},
    {IBV_QPS_RTS, IBV_QPS_RTS, 0, kRtsOptional},
};

bool FindRule(ibv_qp_state from, ibv_qp_state to, TransitionRule* rule) {
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {  // from any state
    *rule = {from, to, 0, 0};
    return true;
  }
  for (const TransitionRule& candidate : kRules) {
    if (candidate.from == from && candidate.to == to) {
      *rule = candidate;
      return true;
    }
  }
  return false;
}

bool GidIsZero(const ibv_gid& gid) {
  for (uint8_t byte : gid.raw) {
    if (byte != 0) return false;
  }
  return true;
}

void FillGids(Device* device) {
  ibv_gid link_local{};
  link_local.raw[0] = 0xfe;
  link_local.raw[1] = 0x80;
  for (int i = 0; i < 8; ++i) {
    link_local.raw[8 + i] = static_cast<uint8_t>(device->guid >> (56 - 8 * i));
  }
  if (device->options.link_layer == LinkLayer::kInfiniBand) {
    device->gids[0] = link_local;
    device->gid_types[0] = IBV_GID_TYPE_IB;
    return;
  }
  ibv_gid mapped{};  // ::ffff:10.0.0.<n>
  mapped.raw[10] = 0xff;
  mapped.raw[11] = 0xff;
  mapped.raw[12] = 10;
  mapped.raw[14] = static_cast<uint8_t>((device->index + 1) >> 8);
  mapped.raw[15] = static_cast<uint8_t>(device->index + 1);
  // The layout of a typical RoCE port: each address as v1 and as v2.
  const ibv_gid entries[4] = {link_local, link_local, mapped, mapped};
  for (int i = 0; i < 4; ++i) {
    device->gids[i] = entries[i];
    device->gid_types[i] = i % 2 == 0 ? IBV_GID_TYPE_ROCE_V1
                                      : IBV_GID_TYPE_ROCE_V2;
  }
}

}  // namespace

Fabric::Fabric() : engine_([this] { RunEngine(); }) {}

Fabric::~Fabric() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  engine_.join();
  link_.reset();  // after the engine, which uses it; frees our slots
}

Status Fabric::AddDevice(const EmulatedDeviceOptions& options) {
  if (options.name.empty() || options.name.size() >= IBV_SYSFS_NAME_MAX) {
    return InvalidArgumentError("emulated device name '", options.name,
                                "' must have 1..", IBV_SYSFS_NAME_MAX - 1,
                                " characters");
  }
  if (MtuBytes(options.active_mtu) == 0 || MtuBytes(options.max_mtu) == 0 ||
      options.active_mtu > options.max_mtu) {
    return InvalidArgumentError("emulated device ", options.name,
                                ": active MTU must be a valid MTU <= max MTU");
  }
  if (options.max_qp_wr < 1 || options.max_sge < 1 || options.max_cqe < 1) {
    return InvalidArgumentError("emulated device ", options.name,
                                ": limits must be positive");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (FindDevice(options.name) != nullptr) {
    return AlreadyExistsError("emulated device ", options.name,
                              " already exists");
  }
  auto device = std::make_unique<Device>();
  device->options = options;
  device->index = static_cast<int>(devices_.size());
  if (link_ != nullptr) {  // joined: the fabric-wide slot numbers the port
    ASSIGN_OR_RETURN(device->slot, link_->Claim());
    device->index = device->slot - 1;
  }
  device->device.node_type = IBV_NODE_CA;
  device->device.transport_type = IBV_TRANSPORT_IB;
  std::snprintf(device->device.name, sizeof(device->device.name), "%s",
                options.name.c_str());
  std::snprintf(device->device.dev_name, sizeof(device->device.dev_name),
                "uverbs%d", device->index);
  device->guid = kGuidBase + device->index;
  if (options.link_layer == LinkLayer::kInfiniBand) {
    device->lid = static_cast<uint16_t>(device->index + 1);
  }
  FillGids(device.get());
  // Distinct per device so that a key or QPN of one device means nothing on
  // another (the way real HCAs hand out unrelated numbers).
  device->next_qp_num = 0x100 + 0x1000 * device->index;
  device->next_key = 0x1000 * (device->index + 1) + 0x17;
  devices_.push_back(std::move(device));
  return Status::OK();
}

Device* Fabric::FindDevice(const std::string& name) const {
  for (const auto& device : devices_) {
    if (device->options.name == name) return device.get();
  }
  return nullptr;
}

ibv_device** Fabric::GetDeviceList(const std::vector<std::string>& visible,
                                   int* num_devices) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ibv_device*> listed;
  if (visible.empty()) {
    for (const auto& device : devices_) listed.push_back(&device->device);
  } else {
    for (const std::string& name : visible) {
      Device* device = FindDevice(name);
      if (device != nullptr) listed.push_back(&device->device);
    }
  }
  auto** list = new ibv_device*[listed.size() + 1];
  for (size_t i = 0; i < listed.size(); ++i) list[i] = listed[i];
  list[listed.size()] = nullptr;
  if (num_devices != nullptr) *num_devices = static_cast<int>(listed.size());
  return list;
}

ibv_context* Fabric::OpenDevice(ibv_device* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& device : devices_) {
    if (&device->device != handle) continue;
    auto context = std::make_unique<Context>();
    context->device = device.get();
    context->context.device = handle;
    context->context.cmd_fd = -1;
    context->context.async_fd = -1;
    context->context.num_comp_vectors = 1;
    ibv_context* result = &context->context;
    ++device->open_contexts;
    contexts_[result] = std::move(context);
    return result;
  }
  errno = ENODEV;
  return nullptr;
}

int Fabric::CloseDevice(ibv_context* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  Context* context = Lookup(contexts_, handle);
  if (context == nullptr) return EINVAL;
  if (context->users > 0) return EBUSY;
  --context->device->open_contexts;
  contexts_.erase(handle);
  return 0;
}

int Fabric::QueryDevice(ibv_context* handle, ibv_device_attr* attr) {
  std::lock_guard<std::mutex> lock(mutex_);
  Context* context = Lookup(contexts_, handle);
  if (context == nullptr || attr == nullptr) return EINVAL;
  const Device& device = *context->device;
  std::memset(attr, 0, sizeof(*attr));
  std::snprintf(attr->fw_ver, sizeof(attr->fw_ver), "oflite-emulator");
  attr->node_guid = device.guid;
  attr->sys_image_guid = device.guid;
  attr->max_mr_size = ~0ull;
  attr->page_size_cap = 4096;
  attr->vendor_id = 0x02c9;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = device.options.max_qp_wr;
  attr->max_sge = device.options.max_sge;
  attr->max_cq = 1 << 16;
  attr->max_cqe = device.options.max_cqe;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->max_qp_rd_atom = kMaxQpRdAtomic;
  attr->max_qp_init_rd_atom = kMaxQpRdAtomic;
  attr->max_res_rd_atom = kMaxQpRdAtomic << 16;
  attr->max_pkeys = 1;
  attr->phys_port_cnt = 1;
  return 0;
}

int Fabric::QueryPort(ibv_context* handle, uint8_t port,
                      ibv_port_attr* attr) {
  std::lock_guard<std::mutex> lock(mutex_);
  Context* context = Lookup(contexts_, handle);
  if (context == nullptr || attr == nullptr || port != 1) return EINVAL;
  const Device& device = *context->device;
  std::memset(attr, 0, sizeof(*attr));
  attr->state = device.failed ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  attr->phys_state = device.failed ? 3 : 5;  // Disabled / LinkUp
  attr->max_mtu = device.options.max_mtu;
  attr->active_mtu = device.options.active_mtu;
  attr->gid_tbl_len = kGidTableLength;
  attr->max_msg_sz = device.options.max_message_size;
  attr->pkey_tbl_len = 1;
  attr->lid = device.lid;
  attr->sm_lid = device.options.link_layer == LinkLayer::kInfiniBand ? 1 : 0;
  attr->max_vl_num = 1;
  attr->active_width = 2;  // 4x
  attr->active_speed = 32;  // EDR
  attr->link_layer = device.options.link_layer == LinkLayer::kEthernet
                         ? IBV_LINK_LAYER_ETHERNET
                         : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

int Fabric::QueryGid(ibv_context* handle, uint8_t port, int index,
                     ibv_gid* gid) {
  std::lock_guard<std::mutex> lock(mutex_);
  Context* context = Lookup(contexts_, handle);
  if (context == nullptr || gid == nullptr || port != 1 || index < 0 ||
      index >= kGidTableLength) {
    return EINVAL;
  }
  *gid = context->device->gids[index];
  return 0;
}

int Fabric::QueryGidType(ibv_context* handle, uint8_t port, int index,
                         ibv_gid_type* type) {
  std::lock_guard<std::mutex> lock(mutex_);
  Context* context = Lookup(contexts_, handle);
  if (context == nullptr || type == nullptr || port != 1 || index < 0 ||
      index >= kGidTableLength || GidIsZero(context->device->gids[index])) {
    return EINVAL;
  }
  *type = context->device->gid_types[index];
  return 0;
}

ibv_pd* Fabric::AllocPd(ibv_context* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  Context* context = Lookup(contexts_, handle);
  if (context == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto pd = std::make_unique<ProtectionDomain>();
  pd->owner = context;
  pd->pd.context = handle;
  ibv_pd* result = &pd->pd;
  ++context->users;
  pds_[result] = std::move(pd);
  return result;
}

int Fabric::DeallocPd(ibv_pd* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  ProtectionDomain* pd = Lookup(pds_, handle);
  if (pd == nullptr) return EINVAL;
  if (pd->users > 0) return EBUSY;
  --pd->owner->users;
  pds_.erase(handle);
  return 0;
}

ibv_mr* Fabric::RegMr(ibv_pd* handle, void* address, size_t length,
                      int access) {
  std::lock_guard<std::mutex> lock(mutex_);
  ProtectionDomain* pd = Lookup(pds_, handle);
  constexpr int kKnown = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                         IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  // Like the kernel: remote write/atomic access requires local write.
  bool needs_local_write =
      (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0;
  if (pd == nullptr || (access & ~kKnown) != 0 ||
      (needs_local_write && !(access & IBV_ACCESS_LOCAL_WRITE)) ||
      (address == nullptr && length > 0)) {
    errno = EINVAL;
    return nullptr;
  }
  Device* device = pd->owner->device;
  auto mr = std::make_unique<MemoryRegion>();
  mr->pd = pd;
  mr->access = access;
  mr->mr.context = pd->pd.context;
  mr->mr.pd = handle;
  mr->mr.addr = address;
  mr->mr.length = length;
  uint32_t key = device->next_key;
  device->next_key += 0x100;  // low byte stays a per-device "key variant"
  mr->mr.lkey = key;
  mr->mr.rkey = key;
  device->mrs[key] = mr.get();
  ibv_mr* result = &mr->mr;
  ++pd->users;
  mrs_[result] = std::move(mr);
  return result;
}

int Fabric::DeregMr(ibv_mr* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryRegion* mr = Lookup(mrs_, handle);
  if (mr == nullptr) return EINVAL;
  mr->pd->owner->device->mrs.erase(mr->mr.lkey);
  --mr->pd->users;
  mrs_.erase(handle);
  return 0;
}

ibv_cq* Fabric::CreateCq(ibv_context* handle, int cqe, void* cq_context,
                         ibv_comp_channel* channel_handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  Context* context = Lookup(contexts_, handle);
  CompletionChannel* channel = nullptr;
  if (channel_handle != nullptr) {
    channel = Lookup(channels_, channel_handle);
    if (channel == nullptr || channel->owner != context) {
      errno = EINVAL;
      return nullptr;
    }
  }
  if (context == nullptr || cqe < 1 ||
      cqe > context->device->options.max_cqe) {
    errno = EINVAL;
    return nullptr;
  }
  auto cq = std::make_unique<CompletionQueue>();
  cq->owner = context;
  cq->channel = channel;
  cq->capacity = static_cast<size_t>(cqe);
  cq->cq.context = handle;
  cq->cq.channel = channel_handle;
  cq->cq.cq_context = cq_context;
  cq->cq.cqe = cqe;
  ibv_cq* result = &cq->cq;
  ++context->users;
  if (channel != nullptr) ++channel->users;
  cqs_[result] = std::move(cq);
  return result;
}

int Fabric::DestroyCq(ibv_cq* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  CompletionQueue* cq = Lookup(cqs_, handle);
  if (cq == nullptr) return EINVAL;
  // Busy while QPs use it, or while events were handed out but not acked
  // (libibverbs would block forever there).
  if (cq->users > 0 || cq->events_delivered != cq->events_acked) return EBUSY;
  if (cq->channel != nullptr) {
    auto& events = cq->channel->events;
    events.erase(std::remove(events.begin(), events.end(), handle),
                 events.end());
    --cq->channel->users;
  }
  --cq->owner->users;
  cqs_.erase(handle);
  return 0;
}

ibv_qp* Fabric::CreateQp(ibv_pd* pd_handle, ibv_qp_init_attr* init) {
  std::lock_guard<std::mutex> lock(mutex_);
  ProtectionDomain* pd = Lookup(pds_, pd_handle);
  if (pd == nullptr || init == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (init->qp_type != IBV_QPT_RC || init->srq != nullptr) {
    errno = EOPNOTSUPP;  // the emulator models reliable connections only
    return nullptr;
  }
  CompletionQueue* send_cq = Lookup(cqs_, init->send_cq);
  CompletionQueue* recv_cq = Lookup(cqs_, init->recv_cq);
  Device* device = pd->owner->device;
  const ibv_qp_cap& cap = init->cap;
  const EmulatedDeviceOptions& limits = device->options;
  if (send_cq == nullptr || recv_cq == nullptr ||
      send_cq->owner->device != device || recv_cq->owner->device != device ||
      cap.max_send_wr < 1 || cap.max_recv_wr < 1 ||
      cap.max_send_wr > static_cast<uint32_t>(limits.max_qp_wr) ||
      cap.max_recv_wr > static_cast<uint32_t>(limits.max_qp_wr) ||
      cap.max_send_sge > static_cast<uint32_t>(limits.max_sge) ||
      cap.max_recv_sge > static_cast<uint32_t>(limits.max_sge) ||
      cap.max_inline_data > limits.max_inline_data) {
    errno = EINVAL;
    return nullptr;
  }
  auto qp = std::make_unique<QueuePair>();
  qp->device = device;
  qp->pd = pd;
  qp->send_cq = send_cq;
  qp->recv_cq = recv_cq;
  qp->cap = cap;
  qp->signal_all = init->sq_sig_all != 0;
  qp->qp.context = pd_handle->context;
  qp->qp.qp_context = init->qp_context;
  qp->qp.pd = pd_handle;
  qp->qp.send_cq = init->send_cq;
  qp->qp.recv_cq = init->recv_cq;
  qp->qp.qp_num = device->next_qp_num++ & kPsnMask;
  qp->qp.state = IBV_QPS_RESET;
  qp->qp.qp_type = IBV_QPT_RC;
  qp->attr.qp_state = IBV_QPS_RESET;
  qp->attr.cap = cap;
  ibv_qp* result = &qp->qp;
  ++pd->users;
  ++send_cq->users;
  ++recv_cq->users;
  device->qps[qp->qp.qp_num] = qp.get();
  qp_handles_[result] = qp.get();
  qps_[{device->index, qp->qp.qp_num}] = std::move(qp);
  return result;
}

int Fabric::DestroyQp(ibv_qp* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = qp_handles_.find(handle);
  if (it == qp_handles_.end()) return EINVAL;
  QueuePair* qp = it->second;
  PurgeCompletions(qp);
  --qp->pd->users;
  --qp->send_cq->users;
  --qp->recv_cq->users;
  qp->device->qps.erase(qp->qp.qp_num);
  qp_handles_.erase(it);
  qps_.erase({qp->device->index, qp->qp.qp_num});
  return 0;
}

int Fabric::ValidateQpAttributes(const QueuePair& qp, const ibv_qp_attr& attr,
                                 int mask) const {
  const Device& device = *qp.device;
  if ((mask & IBV_QP_PORT) && attr.port_num != 1) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && attr.pkey_index != 0) return EINVAL;
  constexpr int kQpAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                            IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (attr.qp_access_flags & ~kQpAccess) != 0) {
    return EINVAL;
  }
  if ((mask & IBV_QP_PATH_MTU) &&
      (MtuBytes(attr.path_mtu) == 0 ||
       attr.path_mtu > device.options.active_mtu)) {
    return EINVAL;
  }
  if (mask & IBV_QP_AV) {
    const ibv_ah_attr& ah = attr.ah_attr;
    if (ah.port_num != 1) return EINVAL;
    bool ethernet = device.options.link_layer == LinkLayer::kEthernet;
    if (ethernet && !ah.is_global) return EINVAL;  // RoCE needs a GRH
    if (!ethernet && ah.dlid == 0) return EINVAL;
    if (ah.is_global &&
        (ah.grh.sgid_index >= kGidTableLength ||
         GidIsZero(device.gids[ah.grh.sgid_index]))) {
      return EINVAL;
    }
  }
  if ((mask & IBV_QP_DEST_QPN) && attr.dest_qp_num > kPsnMask) return EINVAL;
  if ((mask & IBV_QP_RQ_PSN) && attr.rq_psn > kPsnMask) return EINVAL;
  if ((mask & IBV_QP_SQ_PSN) && attr.sq_psn > kPsnMask) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && attr.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && attr.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && attr.rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && attr.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
      attr.max_rd_atomic > kMaxQpRdAtomic) {
    return EINVAL;
  }
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
      attr.max_dest_rd_atomic > kMaxQpRdAtomic) {
    return EINVAL;
  }
  return 0;
}

void Fabric::ApplyQpAttributes(QueuePair* qp, const ibv_qp_attr& attr,
                               int mask) {
  ibv_qp_attr& current = qp->attr;
  if (mask & IBV_QP_PKEY_INDEX) current.pkey_index = attr.pkey_index;
  if (mask & IBV_QP_PORT) current.port_num = attr.port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) {
    current.qp_access_flags = attr.qp_access_flags;
  }
  if (mask & IBV_QP_AV) current.ah_attr = attr.ah_attr;
  if (mask & IBV_QP_PATH_MTU) current.path_mtu = attr.path_mtu;
  if (mask & IBV_QP_DEST_QPN) current.dest_qp_num = attr.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) {
    current.rq_psn = attr.rq_psn;
    qp->expected_recv_psn = attr.rq_psn;
  }
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
    current.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  }
  if (mask & IBV_QP_MIN_RNR_TIMER) current.min_rnr_timer = attr.min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) current.timeout = attr.timeout;
  if (mask & IBV_QP_RETRY_CNT) current.retry_cnt = attr.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) current.rnr_retry = attr.rnr_retry;
  if (mask & IBV_QP_SQ_PSN) {
    current.sq_psn = attr.sq_psn;
    qp->next_send_psn = attr.sq_psn;
  }
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) current.max_rd_atomic = attr.max_rd_atomic;
}

void Fabric::ResetQp(QueuePair* qp) {
  PurgeCompletions(qp);
  qp->send_queue.clear();
  qp->recv_queue.clear();
  qp->send_retired = qp->next_send_sequence;
  qp->recv_retired = qp->next_recv_sequence;
  qp->transport_retries = 0;
  qp->rnr_retries = 0;
  qp->answered_any = false;  // a reconnected QP owes no earlier peer an ACK
  ibv_qp_cap cap = qp->attr.cap;
  qp->attr = ibv_qp_attr{};
  qp->attr.cap = cap;
}

int Fabric::ModifyQp(ibv_qp* handle, ibv_qp_attr* attr, int mask) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = qp_handles_.find(handle);
  if (it == qp_handles_.end() || attr == nullptr) return EINVAL;
  QueuePair* qp = it->second;
  ibv_qp_state current = qp->attr.qp_state;
  if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != current) {
    return EINVAL;
  }
  ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : current;
  TransitionRule rule;
  if (!FindRule(current, next, &rule)) return EINVAL;
  int given = mask & ~IBV_QP_STATE;
  if ((given & rule.required) != rule.required) return EINVAL;
  if ((given & ~(rule.required | rule.optional)) != 0) return EINVAL;
  int error = ValidateQpAttributes(*qp, *attr, given);
  if (error != 0) return error;
  if (next == IBV_QPS_RESET) {
    ResetQp(qp);
  } else if (next == IBV_QPS_ERR) {
    EnterError(qp);
  } else {
    ApplyQpAttributes(qp, *attr, given);
  }
  qp->attr.qp_state = next;
  qp->qp.state = next;
  lock.unlock();
  work_.notify_all();
  return 0;
}

int Fabric::QueryQp(ibv_qp* handle, ibv_qp_attr* attr,
                    ibv_qp_init_attr* init_attr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = qp_handles_.find(handle);
  if (it == qp_handles_.end() || attr == nullptr) return EINVAL;
  const QueuePair& qp = *it->second;
  *attr = qp.attr;
  attr->cur_qp_state = qp.attr.qp_state;
  attr->cap = qp.cap;
  if (init_attr != nullptr) {
    std::memset(init_attr, 0, sizeof(*init_attr));
    init_attr->qp_context = qp.qp.qp_context;
    init_attr->send_cq = qp.qp.send_cq;
    init_attr->recv_cq = qp.qp.recv_cq;
    init_attr->cap = qp.cap;
    init_attr->qp_type = IBV_QPT_RC;
    init_attr->sq_sig_all = qp.signal_all ? 1 : 0;
  }
  return 0;
}

Status Fabric::InjectQpError(const std::string& name, uint32_t qp_num) {
  std::unique_lock<std::mutex> lock(mutex_);
  Device* device = FindDevice(name);
  if (device == nullptr) return NotFoundError("no emulated device ", name);
  auto it = device->qps.find(qp_num);
  if (it == device->qps.end()) {
    return NotFoundError("no QP ", qp_num, " on emulated device ", name);
  }
  EnterError(it->second);
  lock.unlock();
  work_.notify_all();
  return Status::OK();
}

Status Fabric::FailDevice(const std::string& name) {
  std::unique_lock<std::mutex> lock(mutex_);
  Device* device = FindDevice(name);
  if (device == nullptr) return NotFoundError("no emulated device ", name);
  device->failed = true;
  for (auto& [qp_num, qp] : device->qps) EnterError(qp);
  lock.unlock();
  work_.notify_all();
  return Status::OK();
}

std::vector<uint32_t> Fabric::QpNumbers(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint32_t> numbers;
  Device* device = FindDevice(name);
  if (device == nullptr) return numbers;
  for (const auto& entry : device->qps) numbers.push_back(entry.first);
  return numbers;
}

int Fabric::fork_init_calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fork_init_calls_;
}

std::shared_ptr<VerbsApi> Fabric::MakeApi(
    const std::vector<std::string>& visible) {
  auto api = std::make_shared<VerbsApi>();
  api->implementation = "emulator";
  api->get_device_list = [this, visible](int* count) {
    return GetDeviceList(visible, count);
  };
  api->free_device_list = [](ibv_device** list) { delete[] list; };
  api->get_device_name = [](ibv_device* device) -> const char* {
    return device == nullptr ? nullptr : device->name;
  };
  api->open_device = [this](ibv_device* d) { return OpenDevice(d); };
  api->close_device = [this](ibv_context* c) { return CloseDevice(c); };
  api->query_device = [this](ibv_context* c, ibv_device_attr* a) {
    return QueryDevice(c, a);
  };
  api->query_port = [this](ibv_context* c, uint8_t p, ibv_port_attr* a) {
    return QueryPort(c, p, a);
  };
  api->query_gid = [this](ibv_context* c, uint8_t p, int i, ibv_gid* g) {
    return QueryGid(c, p, i, g);
  };
  api->query_gid_type = [this](ibv_context* c, uint8_t p, int i,
                               ibv_gid_type* type) {
    return QueryGidType(c, p, i, type);
  };
  api->alloc_pd = [this](ibv_context* c) { return AllocPd(c); };
  api->dealloc_pd = [this](ibv_pd* pd) { return DeallocPd(pd); };
  api->reg_mr = [this](ibv_pd* pd, void* a, size_t n, int access) {
    return RegMr(pd, a, n, access);
  };
  api->dereg_mr = [this](ibv_mr* mr) { return DeregMr(mr); };
  api->create_cq = [this](ibv_context* c, int cqe, void* user,
                          ibv_comp_channel* channel, int) {
    return CreateCq(c, cqe, user, channel);
  };
  api->create_comp_channel = [this](ibv_context* c) {
    return CreateCompChannel(c);
  };
  api->destroy_comp_channel = [this](ibv_comp_channel* channel) {
    return DestroyCompChannel(channel);
  };
  api->req_notify_cq = [this](ibv_cq* cq, int) { return ReqNotifyCq(cq); };
  api->get_cq_event = [this](ibv_comp_channel* channel, ibv_cq** cq,
                             void** user) {
    return GetCqEvent(channel, cq, user);
  };
  api->ack_cq_events = [this](ibv_cq* cq, unsigned int count) {
    AckCqEvents(cq, count);
  };
  api->destroy_cq = [this](ibv_cq* cq) { return DestroyCq(cq); };
  api->poll_cq = [this](ibv_cq* cq, int n, ibv_wc* wc) {
    return PollCq(cq, n, wc);
  };
  api->create_qp = [this](ibv_pd* pd, ibv_qp_init_attr* a) {
    return CreateQp(pd, a);
  };
  api->destroy_qp = [this](ibv_qp* qp) { return DestroyQp(qp); };
  api->modify_qp = [this](ibv_qp* qp, ibv_qp_attr* a, int mask) {
    return ModifyQp(qp, a, mask);
  };
  api->query_qp = [this](ibv_qp* qp, ibv_qp_attr* a, int,
                         ibv_qp_init_attr* init) {
    return QueryQp(qp, a, init);
  };
  api->post_send = [this](ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    return PostSend(qp, wr, bad);
  };
  api->post_recv = [this](ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    return PostRecv(qp, wr, bad);
  };
  api->fork_init = [this] {
    std::lock_guard<std::mutex> lock(mutex_);
    ++fork_init_calls_;
    return 0;
  };
  return api;
}

}  // namespace emulator

VerbsEmulator::VerbsEmulator() : fabric_(new emulator::Fabric()) {}
VerbsEmulator::~VerbsEmulator() = default;

std::shared_ptr<VerbsEmulator> VerbsEmulator::Create() {
  return std::shared_ptr<VerbsEmulator>(new VerbsEmulator());
}

Status VerbsEmulator::CheckFabricName(const std::string& fabric_name) {
  return emulator::CheckFabricName(fabric_name);
}

StatusOr<std::shared_ptr<VerbsEmulator>> VerbsEmulator::Join(
    const std::string& fabric_name) {
  std::shared_ptr<VerbsEmulator> emulator(new VerbsEmulator());
  emulator::Fabric* fabric = emulator->fabric_.get();
  ASSIGN_OR_RETURN(
      std::unique_ptr<emulator::Link> link,
      emulator::Link::Create(fabric_name, [fabric](int slot, pid_t sender,
                                                   const std::string& body) {
        return fabric->HandleRemote(slot, sender, body);
      }));
  fabric->AttachLink(std::move(link));
  return emulator;
}

Status VerbsEmulator::AddDevice(const EmulatedDeviceOptions& options) {
  return fabric_->AddDevice(options);
}

std::shared_ptr<const VerbsApi> VerbsEmulator::Api(
    const std::vector<std::string>& visible_devices) {
  std::shared_ptr<VerbsApi> api = fabric_->MakeApi(visible_devices);
  api->keep_alive = shared_from_this();
  return api;
}

Status VerbsEmulator::InjectQpError(const std::string& device,
                                    uint32_t qp_num) {
  return fabric_->InjectQpError(device, qp_num);
}

Status VerbsEmulator::FailDevice(const std::string& device) {
  return fabric_->FailDevice(device);
}

std::vector<uint32_t> VerbsEmulator::QpNumbers(
    const std::string& device) const {
  return fabric_->QpNumbers(device);
}

int VerbsEmulator::fork_init_calls() const {
  return fabric_->fork_init_calls();
}

}  // namespace verbs
}  // namespace oflite
