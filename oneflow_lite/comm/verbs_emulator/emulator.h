// VerbsEmulator: a software model of the libibverbs subset in VerbsApi, for
// tests on machines without RDMA hardware (and, behind the explicit
// --ib_emulator flag of the CLI, for running jobs there; never in production
// paths otherwise).
//
// One VerbsEmulator is one fabric (a subnet with its switch): any number of
// emulated HCAs ("devices", one port each) attached to it, reachable from each
// other by LID (InfiniBand link layer) or by GID (Ethernet link layer, RoCE).
// Several "machines" in one test process each take a VerbsApi that lists only
// their own device(s) (Api({"emu0"})), exactly as each host sees only its own
// HCAs. Several emulators may coexist; they never see each other.
//
// Faithfulness. The emulator checks what an HCA checks and fails the way an
// HCA fails (details in emulator.cc and docs/rdma.md):
//   * registration: every local scatter/gather entry must lie inside an MR of
//     the QP's protection domain found by its lkey (else IBV_WC_LOC_PROT_ERR;
//     a READ's or RECV's destination also needs IBV_ACCESS_LOCAL_WRITE);
//   * remote keys: an RDMA READ/WRITE needs an rkey of the responder's PD
//     covering the range, with IBV_ACCESS_REMOTE_READ/WRITE on both the MR and
//     the responder QP (else IBV_WC_REM_ACCESS_ERR at the requester, and the
//     responder QP moves to the error state);
//   * the RC state machine RESET->INIT->RTR->RTS with the attribute masks the
//     IB specification requires and allows per transition (else EINVAL);
//     post_send needs RTS, post_recv INIT or later (else EINVAL); posting in
//     ERR completes the work request with IBV_WC_WR_FLUSH_ERR;
//   * addressing: packets are routed by DLID, or by DGID when the port's link
//     layer is Ethernet (where a GRH is mandatory); the responder accepts them
//     only from its connected QP, with the expected PSN and a path MTU its port
//     supports. Anything else is dropped, so the requester retransmits every
//     `timeout` (4.096 us << timeout) and after `retry_cnt` retries completes
//     with IBV_WC_RETRY_EXC_ERR;
//   * SEND / WRITE_WITH_IMM need a posted receive: otherwise RNR NAK, retried
//     after the responder's min_rnr_timer up to `rnr_retry` times (7 =
//     forever), then IBV_WC_RNR_RETRY_EXC_ERR;
//   * after an error completion the QP is in ERR and every outstanding work
//     request completes with IBV_WC_WR_FLUSH_ERR;
//   * queue depths: at most max_send_wr / max_recv_wr work requests may be
//     outstanding; a send slot is retired when a completion for it (or for a
//     later work request of the same QP) has been polled, as on mlx5;
//   * a CQ that would hold more than `cqe` completions overruns: poll_cq
//     returns -1 from then on (hardware raises IBV_EVENT_CQ_ERR);
//   * completion channels: a pipe whose read end is the channel's fd; a CQ
//     armed with req_notify_cq produces one event (one byte) on its next
//     completion; get_cq_event blocks on the fd; destroy_cq is EBUSY while
//     events it handed out are unacknowledged.
// Delivery runs on one emulator thread, asynchronously to posting, one work
// request per QP at a time and in order per QP. Data is copied with memcpy
// under the fabric lock: figures measured on the emulator are functional,
// never RDMA speed.
//
// Across processes. VerbsEmulator::Join(name) makes this process one part of
// a fabric shared by every process of this user on the host that joins the
// same name. Each process owns the devices it adds; each device claims a
// fabric-wide slot, which is its LID (InfiniBand) and is encoded in its GIDs
// (RoCE), by binding an abstract unix socket named after the fabric and the
// slot (the first free one; the kernel frees it when the process exits, even
// by kill -9: nothing is left in the file system or /dev/shm). A packet for a
// device of another process goes over that socket to the owner's link
// thread, which applies every responder check above (connected QP, PSN, MTU,
// rkey / PD / access, posted receive) and moves the bytes itself between the
// two processes' registered memory with process_vm_readv/writev, as the
// responder's HCA would by DMA (inline data travels in the packet). The
// requester checks its own side (lkeys) as before. A process that is gone
// (nobody owns the slot, the connection broke) drops the packet: the
// requester retries and completes with IBV_WC_RETRY_EXC_ERR after its QP
// timeout, as with a dead remote HCA. A reply lost after the responder acted
// is repaired as IB does: the retransmitted packet repeats the last PSN and is
// ACKed again (a READ is re-read). Cross-memory attach needs the processes to
// run as one user with ptrace allowed (kernel.yama.ptrace_scope); otherwise
// requests complete with IBV_WC_LOC_PROT_ERR. Devices of one process still
// talk in-process; two emulators joined in one process talk through the
// sockets (tests use that).
//
// Thread-safety: all entries of the VerbsApi and all methods are thread-safe.
// Lifetime: Create() returns a shared fabric; every VerbsApi it hands out
// keeps it alive. Objects created through a VerbsApi must be destroyed through
// it (the emulator reports EBUSY for a PD/CQ/context still in use).
#ifndef ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_H_
#define ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/comm/verbs_api/verbs_api.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace verbs {
namespace emulator {
class Fabric;
}  // namespace emulator

enum class LinkLayer { kInfiniBand, kEthernet };

struct EmulatedDeviceOptions {
  std::string name;  // e.g. "emu0"; unique within the fabric
  LinkLayer link_layer = LinkLayer::kInfiniBand;
  ibv_mtu active_mtu = IBV_MTU_4096;
  ibv_mtu max_mtu = IBV_MTU_4096;
  uint32_t max_message_size = 1u << 30;  // port max_msg_sz
  int max_qp_wr = 16384;
  int max_sge = 16;
  int max_cqe = 1 << 20;
  uint32_t max_inline_data = 256;
};

class VerbsEmulator : public std::enable_shared_from_this<VerbsEmulator> {
 public:
  // A fabric private to this process (the original in-process model).
  static std::shared_ptr<VerbsEmulator> Create();
  // This process's part of the host-wide fabric `fabric_name` (1..64
  // characters of [A-Za-z0-9._-], else InvalidArgument). Devices added to it
  // claim slots; AddDevice returns ResourceExhausted when all are taken.
  static StatusOr<std::shared_ptr<VerbsEmulator>> Join(
      const std::string& fabric_name);
  // OK when `fabric_name` is a name Join accepts; else InvalidArgument.
  static Status CheckFabricName(const std::string& fabric_name);
  ~VerbsEmulator();
  VerbsEmulator(const VerbsEmulator&) = delete;
  VerbsEmulator& operator=(const VerbsEmulator&) = delete;

  // Attaches a new HCA. Its port gets the next LID (1, 2, ...; on a joined
  // fabric the claimed slot) on an
  // InfiniBand link layer, with the GID table [0] fe80::<port GUID> (type
  // IB); on Ethernet LID 0 and the table of a typical RoCE port:
  //   [0] fe80::<interface id> RoCE v1   [1] the same, RoCE v2
  //   [2] ::ffff:10.0.0.<n>    RoCE v1   [3] the same, RoCE v2
  // Other entries (up to 6) are empty (all zero, unusable as a source GID).
  // A RoCE v1 source only reaches v1 destinations, v2 only v2.
  // AlreadyExists for a duplicate name, InvalidArgument for bad limits.
  Status AddDevice(const EmulatedDeviceOptions& options);

  // A function table listing `visible_devices` (all devices when empty), in
  // the given order. The table keeps the fabric alive.
  std::shared_ptr<const VerbsApi> Api(
      const std::vector<std::string>& visible_devices = {});

  // Fault injection: moves QP `qp_num` of `device` to ERR as an asynchronous
  // error would (flushing its work requests). NotFound if absent.
  Status InjectQpError(const std::string& device, uint32_t qp_num);
  // "Pulls the cable" of `device`: every QP on it moves to ERR and packets
  // addressed to it are dropped from now on. NotFound if absent.
  Status FailDevice(const std::string& device);

  // QP numbers currently existing on `device` (ascending), for tests.
  std::vector<uint32_t> QpNumbers(const std::string& device) const;
  // Number of times fork_init was called through any table of this fabric.
  int fork_init_calls() const;

 private:
  VerbsEmulator();
  std::unique_ptr<emulator::Fabric> fabric_;
};

}  // namespace verbs
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_H_
