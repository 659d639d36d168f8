#include "oneflow_lite/comm/verbs_api/verbs_library.h"

#include <dlfcn.h>

#include <cerrno>
#include <cstring>

namespace oflite {
namespace verbs {
namespace {

// Signatures of the exported symbols. Spelled out because verbs.h turns some
// of the names (ibv_get_device_list, ibv_query_port, ibv_reg_mr) into macros.
using GetDeviceListFn = ibv_device** (*)(int*);
using FreeDeviceListFn = void (*)(ibv_device**);
using GetDeviceNameFn = const char* (*)(ibv_device*);
using OpenDeviceFn = ibv_context* (*)(ibv_device*);
using CloseDeviceFn = int (*)(ibv_context*);
using QueryDeviceFn = int (*)(ibv_context*, ibv_device_attr*);
using QueryPortFn = int (*)(ibv_context*, uint8_t, _compat_ibv_port_attr*);
using QueryGidFn = int (*)(ibv_context*, uint8_t, int, ibv_gid*);
using QueryGidExFn = int (*)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*,
                             uint32_t, size_t);
using AllocPdFn = ibv_pd* (*)(ibv_context*);
using DeallocPdFn = int (*)(ibv_pd*);
using RegMrFn = ibv_mr* (*)(ibv_pd*, void*, size_t, int);
using DeregMrFn = int (*)(ibv_mr*);
using CreateCqFn = ibv_cq* (*)(ibv_context*, int, void*, ibv_comp_channel*,
                               int);
using DestroyCqFn = int (*)(ibv_cq*);
using CreateQpFn = ibv_qp* (*)(ibv_pd*, ibv_qp_init_attr*);
using DestroyQpFn = int (*)(ibv_qp*);
using ModifyQpFn = int (*)(ibv_qp*, ibv_qp_attr*, int);
using QueryQpFn = int (*)(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*);
using ForkInitFn = int (*)();
using CreateCompChannelFn = ibv_comp_channel* (*)(ibv_context*);
using DestroyCompChannelFn = int (*)(ibv_comp_channel*);
using GetCqEventFn = int (*)(ibv_comp_channel*, ibv_cq**, void**);
using AckCqEventsFn = void (*)(ibv_cq*, unsigned int);

class Library {
 public:
  Library(void* handle, std::string name)
      : handle_(handle), name_(std::move(name)) {}

  template <typename Fn>
  Status Resolve(const char* symbol, Fn* out) {
    dlerror();
    void* address = dlsym(handle_, symbol);
    if (address == nullptr) {
      const char* why = dlerror();
      return UnavailableError("RDMA unavailable: ", name_, " has no symbol ",
                              symbol, " (", why ? why : "null", ")");
    }
    *out = reinterpret_cast<Fn>(address);
    return Status::OK();
  }

 private:
  void* handle_;
  std::string name_;
};

// The static-inline verbs, compiled here against the installed verbs.h: they
// dispatch through the provider's ops table inside the context, exactly as an
// application linking libibverbs would.
int PollCq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  return ibv_poll_cq(cq, num_entries, wc);
}
int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  return ibv_post_send(qp, wr, bad_wr);
}
int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return ibv_post_recv(qp, wr, bad_wr);
}
int ReqNotifyCq(ibv_cq* cq, int solicited_only) {
  return ibv_req_notify_cq(cq, solicited_only);
}

// ___ibv_query_port without its reference to the linked symbol: the extended
// query when the provider has one, else the exported compat entry point.
int QueryPort(QueryPortFn exported, ibv_context* context, uint8_t port,
              ibv_port_attr* attr) {
  verbs_context* extended = verbs_get_ctx_op(context, query_port);
  if (extended != nullptr) {
    return extended->query_port(context, port, attr, sizeof(*attr));
  }
  std::memset(attr, 0, sizeof(*attr));
  return exported(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

Status FillTable(Library* library, VerbsApi* api) {
  GetDeviceListFn get_device_list = nullptr;
  FreeDeviceListFn free_device_list = nullptr;
  GetDeviceNameFn get_device_name = nullptr;
  OpenDeviceFn open_device = nullptr;
  CloseDeviceFn close_device = nullptr;
  QueryDeviceFn query_device = nullptr;
  QueryPortFn query_port = nullptr;
  QueryGidFn query_gid = nullptr;
  AllocPdFn alloc_pd = nullptr;
  DeallocPdFn dealloc_pd = nullptr;
  RegMrFn reg_mr = nullptr;
  DeregMrFn dereg_mr = nullptr;
  CreateCqFn create_cq = nullptr;
  DestroyCqFn destroy_cq = nullptr;
  CreateQpFn create_qp = nullptr;
  DestroyQpFn destroy_qp = nullptr;
  ModifyQpFn modify_qp = nullptr;
  QueryQpFn query_qp = nullptr;
  ForkInitFn fork_init = nullptr;
  CreateCompChannelFn create_comp_channel = nullptr;
  DestroyCompChannelFn destroy_comp_channel = nullptr;
  GetCqEventFn get_cq_event = nullptr;
  AckCqEventsFn ack_cq_events = nullptr;
  RETURN_IF_ERROR(library->Resolve("ibv_get_device_list", &get_device_list));
  RETURN_IF_ERROR(library->Resolve("ibv_free_device_list", &free_device_list));
  RETURN_IF_ERROR(library->Resolve("ibv_get_device_name", &get_device_name));
  RETURN_IF_ERROR(library->Resolve("ibv_open_device", &open_device));
  RETURN_IF_ERROR(library->Resolve("ibv_close_device", &close_device));
  RETURN_IF_ERROR(library->Resolve("ibv_query_device", &query_device));
  RETURN_IF_ERROR(library->Resolve("ibv_query_port", &query_port));
  RETURN_IF_ERROR(library->Resolve("ibv_query_gid", &query_gid));
  RETURN_IF_ERROR(library->Resolve("ibv_alloc_pd", &alloc_pd));
  RETURN_IF_ERROR(library->Resolve("ibv_dealloc_pd", &dealloc_pd));
  RETURN_IF_ERROR(library->Resolve("ibv_reg_mr", &reg_mr));
  RETURN_IF_ERROR(library->Resolve("ibv_dereg_mr", &dereg_mr));
  RETURN_IF_ERROR(library->Resolve("ibv_create_cq", &create_cq));
  RETURN_IF_ERROR(library->Resolve("ibv_destroy_cq", &destroy_cq));
  RETURN_IF_ERROR(library->Resolve("ibv_create_qp", &create_qp));
  RETURN_IF_ERROR(library->Resolve("ibv_destroy_qp", &destroy_qp));
  RETURN_IF_ERROR(library->Resolve("ibv_modify_qp", &modify_qp));
  RETURN_IF_ERROR(library->Resolve("ibv_query_qp", &query_qp));
  RETURN_IF_ERROR(library->Resolve("ibv_fork_init", &fork_init));
  RETURN_IF_ERROR(
      library->Resolve("ibv_create_comp_channel", &create_comp_channel));
  RETURN_IF_ERROR(
      library->Resolve("ibv_destroy_comp_channel", &destroy_comp_channel));
  RETURN_IF_ERROR(library->Resolve("ibv_get_cq_event", &get_cq_event));
  RETURN_IF_ERROR(library->Resolve("ibv_ack_cq_events", &ack_cq_events));

  api->get_device_list = get_device_list;
  api->free_device_list = free_device_list;
  api->get_device_name = get_device_name;
  api->open_device = open_device;
  api->close_device = close_device;
  api->query_device = query_device;
  api->query_port = [query_port](ibv_context* context, uint8_t port,
                                 ibv_port_attr* attr) {
    return QueryPort(query_port, context, port, attr);
  };
  api->query_gid = query_gid;
  api->alloc_pd = alloc_pd;
  api->dealloc_pd = dealloc_pd;
  api->reg_mr = reg_mr;
  api->dereg_mr = dereg_mr;
  api->create_cq = create_cq;
  api->destroy_cq = destroy_cq;
  api->poll_cq = PollCq;
  api->create_qp = create_qp;
  api->destroy_qp = destroy_qp;
  api->modify_qp = modify_qp;
  api->query_qp = query_qp;
  api->post_send = PostSend;
  api->post_recv = PostRecv;
  api->fork_init = fork_init;
  QueryGidExFn query_gid_ex = nullptr;
  if (library->Resolve("_ibv_query_gid_ex", &query_gid_ex).ok()) {
    api->query_gid_type = [query_gid_ex](ibv_context* context, uint8_t port,
                                         int index, ibv_gid_type* type) {
      ibv_gid_entry entry{};
      int error = query_gid_ex(context, port, static_cast<uint32_t>(index),
                               &entry, 0, sizeof(entry));
      if (error == 0) *type = static_cast<ibv_gid_type>(entry.gid_type);
      return error;
    };
  }
  api->create_comp_channel = create_comp_channel;
  api->destroy_comp_channel = destroy_comp_channel;
  api->req_notify_cq = ReqNotifyCq;
  api->get_cq_event = get_cq_event;
  api->ack_cq_events = ack_cq_events;
  return Status::OK();
}

}  // namespace

StatusOr<std::shared_ptr<const VerbsApi>> LoadVerbsLibrary(
    const VerbsLibraryOptions& options) {
  void* handle = dlopen(options.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return UnavailableError("RDMA unavailable: ", options.library,
                            " not found (install rdma-core / libibverbs1): ",
                            why ? why : "dlopen failed");
  }
  // Never dlclose'd: libibverbs keeps process-wide state (fork tracking,
  // loaded provider drivers) that must outlive every table; dlopen of an
  // already loaded library is cheap and returns the same handle.
  std::shared_ptr<void> keep_alive(handle, [](void*) {});
  auto api = std::make_shared<VerbsApi>();
  api->implementation = options.library;
  api->keep_alive = keep_alive;
  Library library(handle, options.library);
  RETURN_IF_ERROR(FillTable(&library, api.get()));
  if (options.fork_safe) {
    int error = api->fork_init();
    if (error != 0) {
      return FailedPreconditionError(
          "ibv_fork_init failed in ", options.library, ": ",
          std::strerror(error),
          " (it must run before any memory registration; or set "
          "VerbsLibraryOptions::fork_safe=false if this process never forks)");
    }
  }
  return std::shared_ptr<const VerbsApi>(std::move(api));
}

}  // namespace verbs
}  // namespace oflite
