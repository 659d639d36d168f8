// CommNet ibverbs provider: the transport API (comm/transport.h) over RDMA
// reliable-connected queue pairs, on InfiniBand (LID addressing) or RoCE (GID
// addressing), through a verbs::VerbsApi (the real libibverbs opened at run
// time, or the test emulator).
//
// Per transport: one opened HCA port (VerbsDevice), one completion queue and
// one progress thread that polls it (and sleeps on a completion channel when
// idle), runs
// completion callbacks and message handlers, returns message credits and
// sends heartbeat probes. Per peer: one RC QP (IbverbsConnection; message
// rings, flow control and error handling are described there). One-sided
// READs and WRITEs go NIC to NIC; the peer's CPU is not involved.
//
// Connection setup (transport.h): LocalEndpoint(peer) creates the QP (INIT,
// receives posted) and returns the endpoint blob (frame.h: QPN, PSN, LID,
// GID, MTU, ring key); Connect(peer, blob) moves the QP to RTR (path MTU =
// min of both ports' active MTUs; LID, or a GRH when a GID is in use) and RTS
// and returns without waiting for the peer; the caller's barrier guarantees
// the peer is in RTR before traffic flows. Connect does not block.
//
// Fork safety: with `fork_safe` (default) ibv_fork_init() runs before the
// device is opened and memory registered, so a later fork() (launchers,
// subprocesses) cannot corrupt registered memory (verbs_api/verbs_library.h).
//
// Thread-safety and lifetimes follow transport.h. The transport's destructor
// says goodbye to every connected peer (so they fail fast with "rank R closed
// the connection"), flushes every QP and runs every outstanding callback
// (Cancelled, or the real outcome if the NIC finished first) before returning.
#ifndef ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_TRANSPORT_H_
#define ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_TRANSPORT_H_

#include <chrono>
#include <memory>
#include <string>

#include "oneflow_lite/comm/ibverbs/verbs_device.h"
#include "oneflow_lite/comm/transport.h"
#include "oneflow_lite/comm/verbs_api/verbs_api.h"

namespace oflite {
namespace comm {
namespace ibverbs {

struct IbverbsOptions {
  // The verbs implementation; null loads libibverbs.so.1 (an Unavailable
  // "RDMA unavailable ..." error when absent).
  std::shared_ptr<const verbs::VerbsApi> api;
  // HCA, port and GID index (--ib_device, --ib_port, --ib_gid_index).
  DeviceSelection device;
  // Send-queue depth per QP (--ib_queue_depth); more work waits in software.
  int queue_depth = 128;
  // Largest RDMA READ/WRITE work request (--ib_block_size); also capped by
  // both ports' max_msg_sz. Large transfers are split into blocks.
  size_t block_size = 1 << 20;
  // Local ACK timeout, 4.096 us << ack_timeout (--ib_ack_timeout), and the
  // transport retries (--ib_retry_count): a dead peer is detected within
  // about ack_timeout * (retry_count + 1).
  uint8_t ack_timeout = 14;  // 67 ms
  uint8_t retry_count = 7;
  // RNR retries and timer (flow control makes RNR impossible by design; a
  // small retry budget only tolerates a misbehaving peer briefly).
  uint8_t rnr_retry = 3;
  uint8_t min_rnr_timer = 12;  // 0.64 ms
  // Probe period of an idle connection once the peer has been seen.
  std::chrono::milliseconds heartbeat_interval{1000};
  // Bound on each of the destructor's waits (goodbye, flush).
  std::chrono::milliseconds shutdown_timeout{2000};
  // Call ibv_fork_init() before opening the device (--ib_fork_safe).
  bool fork_safe = true;
  // Idle progress thread: after `busy_poll_rounds` empty polls (yielding
  // in between; none on an oversubscribed host, comm/spin_wait.h) it arms the
  // CQ and sleeps on a completion channel (no CPU while idle), waking at
  // least every 10 ms for heartbeats. false, or an api without completion
  // channels: poll with a back-off up to 640 us instead.
  bool event_driven = true;
  int busy_poll_rounds = 64;
};

StatusOr<std::unique_ptr<Transport>> CreateIbverbsTransport(
    const TransportOptions& options, const IbverbsOptions& ibverbs_options);

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_TRANSPORT_H_
