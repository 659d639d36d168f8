#include "oneflow_lite/comm/ibverbs/verbs_device.h"

#include <cerrno>
#include <cstring>
#include <vector>

namespace oflite {
namespace comm {
namespace ibverbs {
namespace {

bool IsIpv4MappedGid(const ibv_gid& gid) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, kPrefix, sizeof(kPrefix)) == 0;
}

bool IsZeroGid(const ibv_gid& gid) {
  static const ibv_gid kZero{};
  return std::memcmp(gid.raw, kZero.raw, sizeof(gid.raw)) == 0;
}

}  // namespace

int VerbsDevice::PreferredGidIndex(const std::vector<ibv_gid>& table) const {
  // An IPv4-mapped RoCE v2 entry, else any IPv4-mapped one, else entry 0.
  int mapped = -1;
  for (int i = 0; i < static_cast<int>(table.size()); ++i) {
    if (!IsIpv4MappedGid(table[i])) continue;
    ibv_gid_type type;
    if (api_->query_gid_type &&
        api_->query_gid_type(context_, port_, i, &type) == 0 &&
        type == IBV_GID_TYPE_ROCE_V2) {
      return i;
    }
    if (mapped < 0) mapped = i;
  }
  return mapped >= 0 ? mapped : 0;
}

StatusOr<std::shared_ptr<VerbsDevice>> VerbsDevice::Open(
    std::shared_ptr<const verbs::VerbsApi> api,
    const DeviceSelection& selection) {
  std::shared_ptr<VerbsDevice> device(new VerbsDevice());
  device->api_ = std::move(api);
  RETURN_IF_ERROR(device->Initialize(selection));
  return device;
}

Status VerbsDevice::Initialize(const DeviceSelection& selection) {
  if (selection.port < 1 || selection.port > 255) {
    return InvalidArgumentError("ibverbs: port ", selection.port,
                                " out of range 1..255");
  }
  port_ = static_cast<uint8_t>(selection.port);
  int count = 0;
  ibv_device** list = api_->get_device_list(&count);
  if (list == nullptr) {
    return UnavailableError("RDMA unavailable: ibv_get_device_list failed (",
                            std::strerror(errno),
                            "); is the ib_uverbs kernel module loaded?");
  }
  std::string seen;
  for (int i = 0; i < count && context_ == nullptr; ++i) {
    std::string name = api_->get_device_name(list[i]);
    seen += (seen.empty() ? "" : ", ") + name;
    if (!selection.device_name.empty() && name != selection.device_name) {
      continue;
    }
    ibv_context* context = api_->open_device(list[i]);
    if (context == nullptr) continue;
    ibv_port_attr attr{};
    bool usable = api_->query_port(context, port_, &attr) == 0 &&
                  (attr.state == IBV_PORT_ACTIVE ||
                   !selection.device_name.empty());
    if (!usable) {
      api_->close_device(context);
      continue;
    }
    context_ = context;
    name_ = name;
    port_attr_ = attr;
  }
  api_->free_device_list(list);
  if (context_ == nullptr) {
    if (count == 0) {
      return UnavailableError("RDMA unavailable: no RDMA devices found (",
                              api_->implementation, ")");
    }
    return NotFoundError(
        "ibverbs: no ",
        selection.device_name.empty() ? std::string("device with an ACTIVE")
                                      : "device " + selection.device_name +
                                            " with a",
        " port ", selection.port, " (devices: ", seen, ")");
  }
  if (port_attr_.state != IBV_PORT_ACTIVE) {
    return UnavailableError("ibverbs: port ", selection.port, " of ", name_,
                            " is not ACTIVE (state ", port_attr_.state,
                            "); check ibv_devinfo");
  }
  if (int error = api_->query_device(context_, &device_attr_); error != 0) {
    return InternalError("ibverbs: query_device on ", name_, ": ",
                         std::strerror(error));
  }
  RETURN_IF_ERROR(SelectGid(selection.gid_index));
  pd_ = api_->alloc_pd(context_);
  if (pd_ == nullptr) {
    return ResourceExhaustedError("ibverbs: alloc_pd on ", name_, ": ",
                                  std::strerror(errno));
  }
  return Status::OK();
}

Status VerbsDevice::SelectGid(int requested_index) {
  if (requested_index < 0 && !is_ethernet()) return Status::OK();  // LID
  int table_length = port_attr_.gid_tbl_len;
  if (requested_index >= table_length) {
    return InvalidArgumentError("ibverbs: GID index ", requested_index,
                                " beyond the table of ", table_length,
                                " entries of ", name_, " port ", int(port_));
  }
  std::vector<ibv_gid> table(table_length);
  for (int i = 0; i < table_length; ++i) {
    if (api_->query_gid(context_, port_, i, &table[i]) != 0) table[i] = {};
  }
  int chosen = requested_index;
  if (chosen < 0) chosen = PreferredGidIndex(table);
  if (IsZeroGid(table[chosen])) {
    return InvalidArgumentError("ibverbs: GID index ", chosen, " of ", name_,
                                " port ", int(port_),
                                " is empty; pick one listed by show_gids");
  }
  gid_index_ = chosen;
  gid_ = table[chosen];
  return Status::OK();
}

VerbsDevice::~VerbsDevice() {
  if (pd_ != nullptr) {
    int error = api_->dealloc_pd(pd_);
    LOG_IF(WARNING, error != 0) << "ibverbs: dealloc_pd on " << name_ << ": "
                                << std::strerror(error);
  }
  if (context_ != nullptr) {
    int error = api_->close_device(context_);
    LOG_IF(WARNING, error != 0) << "ibverbs: close_device " << name_ << ": "
                                << std::strerror(error);
  }
}

StatusOr<ibv_mr*> VerbsDevice::RegisterRaw(void* data, size_t size,
                                           int verbs_access) {
  ibv_mr* mr = api_->reg_mr(pd_, data, size, verbs_access);
  if (mr == nullptr) {
    int error = errno;
    return ResourceExhaustedError(
        "ibverbs: registering ", size, " bytes at ", data, " on ", name_,
        " failed: ", std::strerror(error),
        error == ENOMEM || error == EPERM || error == EFAULT
            ? " (is `ulimit -l` large enough? see docs/rdma.md)"
            : "");
  }
  return mr;
}

void VerbsDevice::DeregisterRaw(ibv_mr* mr) {
  int error = api_->dereg_mr(mr);
  LOG_IF(WARNING, error != 0) << "ibverbs: dereg_mr on " << name_ << ": "
                              << std::strerror(error);
}

StatusOr<std::unique_ptr<MemoryRegion>> VerbsDevice::Register(
    void* data, size_t size, uint32_t access) {
  if ((access & ~kAccessAll) != 0) {
    return InvalidArgumentError("ibverbs: unknown access flags ", access);
  }
  ibv_mr* mr = nullptr;
  if (size > 0) {
    int verbs_access = 0;
    if (access & (kAccessLocalWrite | kAccessRemoteWrite)) {
      verbs_access |= IBV_ACCESS_LOCAL_WRITE;
    }
    if (access & kAccessRemoteWrite) verbs_access |= IBV_ACCESS_REMOTE_WRITE;
    if (access & kAccessRemoteRead) verbs_access |= IBV_ACCESS_REMOTE_READ;
    ASSIGN_OR_RETURN(mr, RegisterRaw(data, size, verbs_access));
  }
  return std::unique_ptr<MemoryRegion>(
      new VerbsMemoryRegion(shared_from_this(), mr, data, size, access));
}

VerbsMemoryRegion::VerbsMemoryRegion(std::shared_ptr<VerbsDevice> device,
                                     ibv_mr* mr, void* data, size_t size,
                                     uint32_t access)
    : MemoryRegion(data, size, access), device_(std::move(device)), mr_(mr) {}

VerbsMemoryRegion::~VerbsMemoryRegion() {
  if (mr_ != nullptr) device_->DeregisterRaw(mr_);
}

RemoteKey VerbsMemoryRegion::remote_key() const {
  RemoteKey key;
  key.address = reinterpret_cast<uint64_t>(data());
  key.length = size();
  key.rkey = mr_ ? mr_->rkey : 0;
  return key;
}

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
