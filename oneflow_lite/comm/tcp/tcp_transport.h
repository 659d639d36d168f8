// CommNet TCP provider: the transport API (comm/transport.h) over TCP
// sockets, for Ethernet clusters and machines without RDMA.
//
// One progress thread per transport runs an epoll loop over a listening
// socket, an eventfd and one nonblocking socket per peer. It reads frames
// (tcp/frame.h; docs/comm.md), serves peers' READ requests and WRITEs
// straight from/into registered memory (readv/sendmsg on the region, no
// staging copy for payloads of 64 KiB and more), runs completion callbacks
// and message handlers, returns ring credits, and sends PINGs so that a peer
// silent for `peer_timeout` fails the connection. Callers' threads may also
// write to a socket directly (under the connection's lock) when nothing is
// queued, saving a thread hop for small messages.
//
// Connection setup: LocalEndpoint() is "rank, host, port" of this process's
// listener; for a pair, the lower rank dials the higher one and sends HELLO
// (rank, world size, ring geometry, job token); the acceptor checks every
// field, answers HELLO_ACK, or ERROR(PermissionDenied) and closes.
//
// Anyone who can reach the listener may flood it; what an accepted socket
// costs before its HELLO has proven the job token stays small and bounded
// (docs/comm.md, "Limits of the data ports"): a 1 KiB read buffer (the
// 256 KiB one comes after the handshake), a first frame that must be a
// HELLO of at most 4 KiB, `handshake_timeout` to complete it, at most
// `max_pending_handshakes` such sockets (a new one evicts the oldest), and
// a refused or failed unidentified socket is closed and freed at once. At
// the file-descriptor limit, waiting connections are accepted and closed
// and the listener rests for socket_util.h's kAcceptBackoff (no busy loop).
//
// Thread-safety and lifetimes follow transport.h.
#ifndef ONEFLOW_LITE_COMM_TCP_TCP_TRANSPORT_H_
#define ONEFLOW_LITE_COMM_TCP_TCP_TRANSPORT_H_

#include <memory>
#include <string>

#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace tcp {

struct TcpOptions {
  // Address to listen on (and advertise). Port 0 picks a free port.
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;
  // Presented in HELLO; a peer with a different token is refused.
  std::string job_token;
  // An accepted connection must complete its HELLO within this long.
  std::chrono::milliseconds handshake_timeout{5000};
  // Accepted connections waiting for their HELLO, at most.
  int max_pending_handshakes = 64;
  // After handling an event the progress thread polls without sleeping for
  // this long before it blocks in epoll_wait again: a reply that follows
  // soon is picked up without a wake-up (5-10 us each on a loaded host,
  // ~45 us when the core halted on this VM). The polls yield, so runnable
  // threads of the core go first, and stop early while the host is
  // oversubscribed (comm/spin_wait.h); costs at most this much CPU per
  // burst of traffic; 0 disables. 200 us, measured against 50 (docs/benchmarks.md,
  // "Spin bounds").
  std::chrono::microseconds busy_poll{200};
  // Caller progress (transport.h, Transport::Poll): a thread waiting for a
  // message or a completion reads the established connections itself
  // (epoll_wait without waiting, then the reads, handlers and callbacks on
  // its thread) while the progress thread naps on its wake-up eventfd;
  // the progress thread keeps the listener, handshakes and liveness ticks.
  // Saves the hop through the progress thread (two context switches per
  // message when both share a core). docs/comm.md, "Caller progress".
  bool caller_progress = false;
  // While a large payload (64 KiB and more) is read straight into its
  // destination, each read re-arms TCP_QUICKACK: the kernel acknowledges
  // the following segments at once instead of delaying the ACK, so the
  // sender's window reopens sooner. Measured on loopback, 2 processes, 6
  // interleaved rounds: ring all-reduce 1 MiB 1400 -> 1713 MB/s, 4 MiB
  // 1354 -> 1484, CPU per 1 MiB op 696 -> 604 us (docs/benchmarks.md,
  // "Quick ACKs"). One setsockopt per payload read.
  bool quick_ack = true;
  // While a payload of kLowWaterMinPayload bytes or more, read into its
  // destination, arrives slower than trickle_bytes_per_second (a slow
  // link, not a busy loopback), the socket's SO_RCVLOWAT asks for what
  // arrives in about kLowWaterWake at its rate so far, at most
  // receive_low_water bytes and the rest of the payload: the progress
  // thread wakes about once a millisecond for it instead of for every few
  // segments. Back to 1 when the payload is in. 0 disables. Measured on
  // namespace hosts at 1 Gbit/s (docs/benchmarks.md, "Waking for more
  // bytes"): the MLP's steps took the same time or less on a third less
  // CPU; over loopback and 10 Gbit/s nothing moved beyond the noise.
  uint64_t receive_low_water = 256 * 1024;
  double trickle_bytes_per_second = 250e6;
};

// TcpOptions::receive_low_water: wake for what arrives in this long, never
// ask for less than kLowWaterMinBytes, and only for payloads of
// kLowWaterMinPayload bytes and more (a ring's chunks, whole large
// messages): on 4 namespace hosts at 1 Gbit/s the GPT's scatter-gather
// pieces of 16-64 KiB ran 7 % slower with it (6 alternating pairs).
inline constexpr std::chrono::microseconds kLowWaterWake{1000};
inline constexpr size_t kLowWaterMinBytes = 16 * 1024;
inline constexpr size_t kLowWaterMinPayload = 512 * 1024;

// The SO_RCVLOWAT a connection asks for while it reads a payload of
// `payload_length` bytes into its destination, `done` of them in, its
// first read `seconds` ago (<= 0: this is the first read): what arrives in
// kLowWaterWake at the payload's rate so far, at most `cap` and the rest,
// when the payload has kLowWaterMinPayload bytes or more and that rate is
// below `trickle_bytes_per_second`; else 1 (wake for any byte), and 1
// below kLowWaterMinBytes.
int ReceiveLowWater(uint64_t payload_length, uint64_t done, double seconds, uint64_t cap,
                    double trickle_bytes_per_second);

// Creates the transport and starts its listener and progress thread.
StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(
    const TransportOptions& options, const TcpOptions& tcp_options);

}  // namespace tcp
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TCP_TCP_TRANSPORT_H_
