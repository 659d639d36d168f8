// VerbsDevice: one opened HCA port of the ibverbs provider (context, protection
// domain, port attributes, the source GID), and VerbsMemoryRegion, the
// provider's MemoryRegion (an ibv_mr in that PD).
//
// Selection. `device_name` empty picks the first device whose port is ACTIVE;
// a name picks that device or fails with NotFound listing what exists.
// Addressing: an InfiniBand port is addressed by LID unless `gid_index` >= 0
// (then a GRH is used too); an Ethernet (RoCE) port always needs a GID: the
// given `gid_index`, or when -1 the first IPv4-mapped (::ffff:a.b.c.d) entry
// of type RoCE v2 (types from ibv_query_gid_ex), else the first IPv4-mapped
// entry, else entry 0. docs/rdma.md explains how to choose one with
// show_gids.
//
// Lifetime: shared by the transport, its connections and every region
// registered through it; the PD and the context are released when the last
// holder goes. Thread-safe (the verbs calls it makes are).
#ifndef ONEFLOW_LITE_COMM_IBVERBS_VERBS_DEVICE_H_
#define ONEFLOW_LITE_COMM_IBVERBS_VERBS_DEVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/comm/transport.h"
#include "oneflow_lite/comm/verbs_api/verbs_api.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {
namespace ibverbs {

struct DeviceSelection {
  std::string device_name;  // empty: first device with an active port
  int port = 1;
  int gid_index = -1;       // -1: LID on InfiniBand, automatic on RoCE
};

class VerbsDevice : public std::enable_shared_from_this<VerbsDevice> {
 public:
  static StatusOr<std::shared_ptr<VerbsDevice>> Open(
      std::shared_ptr<const verbs::VerbsApi> api,
      const DeviceSelection& selection);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  const verbs::VerbsApi& api() const { return *api_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }
  uint8_t port() const { return port_; }
  const ibv_port_attr& port_attr() const { return port_attr_; }
  const ibv_device_attr& device_attr() const { return device_attr_; }
  bool is_ethernet() const {
    return port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET;
  }
  // -1 when the port is LID-addressed without a GRH.
  int gid_index() const { return gid_index_; }
  const ibv_gid& gid() const { return gid_; }

  // Registers caller memory with transport AccessFlags (remote write implies
  // local write, as the verbs require). `size` 0 registers nothing and gives
  // keys of 0 (zero-length transfers never check keys).
  StatusOr<std::unique_ptr<MemoryRegion>> Register(void* data, size_t size,
                                                   uint32_t access);
  // A raw registration for the provider's own rings.
  StatusOr<ibv_mr*> RegisterRaw(void* data, size_t size, int verbs_access);
  void DeregisterRaw(ibv_mr* mr);

 private:
  VerbsDevice() = default;
  Status Initialize(const DeviceSelection& selection);
  Status SelectGid(int requested_index);
  int PreferredGidIndex(const std::vector<ibv_gid>& table) const;

  std::shared_ptr<const verbs::VerbsApi> api_;
  std::string name_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint8_t port_ = 1;
  ibv_port_attr port_attr_{};
  ibv_device_attr device_attr_{};
  int gid_index_ = -1;
  ibv_gid gid_{};
};

class VerbsMemoryRegion : public MemoryRegion {
 public:
  VerbsMemoryRegion(std::shared_ptr<VerbsDevice> device, ibv_mr* mr,
                    void* data, size_t size, uint32_t access);
  ~VerbsMemoryRegion() override;

  uint32_t local_key() const override { return mr_ ? mr_->lkey : 0; }
  RemoteKey remote_key() const override;
  const VerbsDevice* device() const { return device_.get(); }

 private:
  std::shared_ptr<VerbsDevice> device_;
  ibv_mr* mr_;  // null for a zero-size region
};

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_IBVERBS_VERBS_DEVICE_H_
