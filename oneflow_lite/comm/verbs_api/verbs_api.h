// VerbsApi: the table of libibverbs entry points the ibverbs provider uses.
//
// The provider (comm/ibverbs/) calls RDMA hardware only through a VerbsApi,
// never through <infiniband/verbs.h> functions directly. Two implementations
// fill the table:
//   * LoadVerbsLibrary() (verbs_library.h): libibverbs.so.1 opened at run time
//     with dlopen, so binaries never link -libverbs and run on machines without
//     RDMA;
//   * VerbsEmulator (comm/verbs_emulator/emulator.h, test-only): a software
//     model of the same subset (devices, PD, MR, CQ, RC QPs) that fails like
//     hardware does.
// All objects crossing the table are the real rdma-core types, owned by the
// implementation that created them (release them through the same table).
//
// The entries are std::function so that several emulators (each a separate
// fabric) can live in one process; for the real library each entry wraps a
// dlsym'd symbol, or for the static-inline verbs (ibv_poll_cq, ibv_post_send,
// ibv_post_recv, ibv_query_port) a small function compiled against verbs.h
// that dispatches through the context's ops exactly as the inline would.
//
// Semantics, return values and thread-safety of each entry are those of the
// libibverbs function of the same name (see ibv_*(3)): pointer-returning
// entries return nullptr and set errno on failure, int-returning ones return 0
// or an errno value (poll_cq: the number of completions, or < 0). A VerbsApi is
// immutable after construction and may be shared across threads; `keep_alive`
// holds whatever must outlive every object created through the table (the
// dlopen handle, or the emulator fabric).
#ifndef ONEFLOW_LITE_COMM_VERBS_API_VERBS_API_H_
#define ONEFLOW_LITE_COMM_VERBS_API_VERBS_API_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace oflite {
namespace verbs {

struct VerbsApi {
  // "libibverbs.so.1" or "emulator"; shown in logs and errors.
  std::string implementation;

  std::function<ibv_device**(int* num_devices)> get_device_list;
  std::function<void(ibv_device** list)> free_device_list;
  std::function<const char*(ibv_device* device)> get_device_name;
  std::function<ibv_context*(ibv_device* device)> open_device;
  std::function<int(ibv_context* context)> close_device;
  std::function<int(ibv_context* context, ibv_device_attr* attr)> query_device;
  std::function<int(ibv_context* context, uint8_t port, ibv_port_attr* attr)>
      query_port;
  std::function<int(ibv_context* context, uint8_t port, int index,
                    ibv_gid* gid)>
      query_gid;
  // The type of a GID entry (IB, RoCE v1, RoCE v2). Optional: empty when the
  // library predates ibv_query_gid_ex (rdma-core < 32).
  std::function<int(ibv_context* context, uint8_t port, int index,
                    ibv_gid_type* type)>
      query_gid_type;
  std::function<ibv_pd*(ibv_context* context)> alloc_pd;
  std::function<int(ibv_pd* pd)> dealloc_pd;
  std::function<ibv_mr*(ibv_pd* pd, void* address, size_t length, int access)>
      reg_mr;
  std::function<int(ibv_mr* mr)> dereg_mr;
  std::function<ibv_cq*(ibv_context* context, int cqe, void* cq_context,
                        ibv_comp_channel* channel, int comp_vector)>
      create_cq;
  std::function<int(ibv_cq* cq)> destroy_cq;
  std::function<int(ibv_cq* cq, int num_entries, ibv_wc* wc)> poll_cq;
  std::function<ibv_qp*(ibv_pd* pd, ibv_qp_init_attr* attr)> create_qp;
  std::function<int(ibv_qp* qp)> destroy_qp;
  std::function<int(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask)> modify_qp;
  std::function<int(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                    ibv_qp_init_attr* init_attr)>
      query_qp;
  std::function<int(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr)>
      post_send;
  std::function<int(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr)>
      post_recv;
  // Completion events (optional: an implementation may leave them empty; the
  // provider then polls). A channel's `fd` becomes readable when an armed CQ
  // (req_notify_cq) receives a completion; get_cq_event then returns that CQ
  // (blocking unless the fd is readable) and every event must be acked before
  // the CQ is destroyed.
  std::function<ibv_comp_channel*(ibv_context* context)> create_comp_channel;
  std::function<int(ibv_comp_channel* channel)> destroy_comp_channel;
  std::function<int(ibv_cq* cq, int solicited_only)> req_notify_cq;
  std::function<int(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context)>
      get_cq_event;
  std::function<void(ibv_cq* cq, unsigned int count)> ack_cq_events;
  // Makes registrations safe across fork() (madvise DONTFORK). Must run before
  // the first registration; see verbs_library.h for when it is called.
  std::function<int()> fork_init;

  std::shared_ptr<void> keep_alive;
};

// "IBV_WC_REM_ACCESS_ERR"-style names, independent of any library.
const char* WcStatusName(ibv_wc_status status);
const char* WcOpcodeName(ibv_wc_opcode opcode);
const char* QpStateName(ibv_qp_state state);
// 256, 512, ... 4096 for IBV_MTU_256..IBV_MTU_4096; 0 for anything else.
int MtuBytes(ibv_mtu mtu);

}  // namespace verbs
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_VERBS_API_VERBS_API_H_
