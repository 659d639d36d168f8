// CommNet shm provider: the transport API (comm/transport.h) between
// processes on one host, without a socket on the data path.
//
//   * Messages: per connection one memfd segment holding a single-producer
//     single-consumer ring per direction (message_slots slots of
//     message_slot_size bytes). Free slots are the sender's credits: the
//     consumer advances the ring's tail only after the handler returned, so
//     a slot is never overwritten early; messages beyond the credits wait in
//     the sender's bounded backlog.
//   * SendMessage writes the ring slot on the caller's thread (credits are
//     read from the shared tail); only messages beyond the credits wait in
//     the backlog for the progress thread.
//   * Wake-ups: each transport has one progress thread and one eventfd
//     doorbell, passed to every peer. The thread polls (yielding) for
//     `spin` before it sleeps in epoll, not at all while the host is
//     oversubscribed (comm/spin_wait.h); before sleeping it raises its
//     `sleeping` word in each segment, and a peer that publishes a message
//     or returns credits rings the doorbell only then (no system call per
//     message under load).
//   * Caller progress (ShmOptions::caller_progress, on by default): a
//     waiting caller's Poll runs what the progress thread would (copies,
//     completions, inbound rings, backlogs) under the same progress mutex
//     (try-locked), so handlers and completions still run one at a time;
//     while callers poll, the progress thread naps with its `sleeping`
//     words down until 2 ms (kCallerQuiet) after the last Poll or an
//     EndPolling, and not at all while a thread waits without polling
//     (Transport::BeginBlockingWait).
//   * One-sided READ/WRITE: cross-memory attach (process_vm_readv /
//     process_vm_writev) by the initiator's progress thread (or, up to
//     `inline_copy_bytes`, by the posting thread inside Post*), straight
//     between the two processes' registered buffers: one copy, no staging,
//     the owner's CPU not involved. The owner's region table (a memfd
//     mapped by every peer, shm_region_table.h) is checked first, so keys,
//     ranges, access flags and deregistration behave as on a queue pair.
//     The kernel requires the initiator to pass a ptrace access check on
//     the owner (same user, not blocked by Yama's ptrace_scope or a
//     seccomp profile); a refusal fails the connection naming the rank.
//   * Liveness: the unix socket of the handshake stays open for the life of
//     the connection; the kernel closes it when the peer exits or is
//     killed, which the progress thread sees at once (EPOLLHUP). Messages
//     the peer published before dying are delivered first. A peer that
//     stops consuming messages for peer_timeout fails the connection too.
//   * Nothing is left behind: memfds and abstract sockets have no name in
//     any file system and vanish with the last process that holds them.
//
// Set-up: LocalEndpoint is "rank, pid, nonce, abstract socket name"; for a
// pair the lower rank dials, creates the segment and sends HELLO with
// [segment memfd, its doorbell, its region table]; the higher rank checks
// the HELLO against the endpoint it got from the control plane (nonces,
// SO_PEERCRED pid, ring geometry) and answers HELLO_ACK with [its doorbell,
// its region table] (shm_handshake.h).
//
// Thread-safety and lifetimes follow transport.h.
#ifndef ONEFLOW_LITE_COMM_SHM_SHM_TRANSPORT_H_
#define ONEFLOW_LITE_COMM_SHM_SHM_TRANSPORT_H_

#include <chrono>
#include <memory>

#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace shm {

struct ShmOptions {
  // Regions registered at once, at most (a power of two).
  uint32_t region_table_capacity = 1u << 16;
  // How long the progress thread polls the rings (yielding in between,
  // comm/spin_wait.h) before it sleeps.
  std::chrono::microseconds spin{50};
  // READ/WRITE of at most this many bytes are copied by the posting thread
  // inside Post* (the completion, and the connection failure a bad copy
  // causes, still come from the progress thread); larger ones by the
  // progress thread, so a poster never spends long in a copy. Off by
  // default: it saved nothing measurable on a 2-core host (docs/comm.md).
  size_t inline_copy_bytes = 0;
  // Caller progress (Transport::Poll, docs/comm.md "Caller progress"): a
  // waiting caller's Poll drains the rings and runs the copies and their
  // completions on its own thread, and the progress thread naps meanwhile.
  // false: Poll does nothing and returns false (every delivery through the
  // progress thread). While any thread waits without polling
  // (Transport::BeginBlockingWait: a ring collective, an actor waiting for
  // a peer's register) Poll does nothing either and the progress thread
  // does not nap, so callers' polls never delay those waiters. On: small
  // exchanges 1.2-2.2x faster (4 and 16 KiB, 2-4 processes), a 2-rank
  // training step level (docs/comm.md; allreduce_bench --shm_caller_poll).
  bool caller_progress = true;
  // How long deregistration waits for a peer's copy from the region.
  std::chrono::milliseconds remove_wait{2000};
};

class ShmTransport : public Transport {
 public:
  // RegisterMemory under a key the caller chooses (the `auto` provider
  // uses the key its cross-host provider gave the same buffer, so one
  // RemoteKey serves peers on both). AlreadyExists if the key is live. A
  // region inside a block of AllocateShareable is mapped by the peers
  // (docs/comm.md); AllocateRegistered is such a block and one
  // registration of it (Transport's default).
  virtual StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemoryWithKey(void* data, size_t size,
                                                                        uint32_t access,
                                                                        uint32_t rkey) = 0;
};

// Creates the transport and starts its listener and progress thread.
StatusOr<std::unique_ptr<ShmTransport>> CreateShmTransport(const TransportOptions& options,
                                                           const ShmOptions& shm_options);

}  // namespace shm
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SHM_SHM_TRANSPORT_H_
