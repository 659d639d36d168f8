// The shm provider's connection set-up: the endpoint a rank publishes
// through the control plane, the HELLO / HELLO_ACK records exchanged over a
// unix socket (SOCK_SEQPACKET, abstract namespace: no file is created), and
// the descriptor passing that carries memfds and eventfds with them.
// Formats: docs/comm.md ("The shm provider"). Little-endian, versioned.
//
// Who proves what: the endpoint arrives through the job's control plane
// (which checks the job token). The dialer's HELLO echoes the acceptor's
// nonce and carries its own; each side checks the other's process id with
// SO_PEERCRED against the endpoint. A process outside the job that connects
// to the abstract socket knows neither nonce and is refused.
//
// Free functions, no shared state; every blocking call is bounded by its
// deadline.
#ifndef ONEFLOW_LITE_COMM_SHM_SHM_HANDSHAKE_H_
#define ONEFLOW_LITE_COMM_SHM_SHM_HANDSHAKE_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace shm {

struct Endpoint {
  uint32_t rank = 0;
  uint64_t pid = 0;
  uint64_t nonce = 0;
  std::string socket_name;  // abstract unix socket name, without the leading NUL
};
std::string EncodeEndpoint(const Endpoint& endpoint);
StatusOr<Endpoint> DecodeEndpoint(const std::string& bytes);

struct Hello {
  uint32_t rank = 0;
  uint32_t world_size = 0;
  uint32_t slots = 0;
  uint32_t slot_size = 0;
  uint64_t dialer_nonce = 0;
  uint64_t acceptor_nonce = 0;
};
std::string EncodeHello(const Hello& hello);
StatusOr<Hello> DecodeHello(const std::string& bytes);

// The acceptor's answer: empty `error` means accepted.
struct HelloAck {
  uint32_t rank = 0;
  std::string error;
};
std::string EncodeHelloAck(const HelloAck& ack);
StatusOr<HelloAck> DecodeHelloAck(const std::string& bytes);

// A listening SOCK_SEQPACKET socket on a fresh random abstract name.
StatusOr<int> ListenAbstract(std::string* name);
// Connects to `name`, retrying refusals until `deadline`.
StatusOr<int> DialAbstract(const std::string& name, Deadline deadline, const std::string& peer);
// The process id at the other end of a connected unix socket.
StatusOr<pid_t> PeerPid(int fd);

// One record with up to 4 descriptors (not closed here).
Status SendRecord(int fd, const std::string& bytes, const std::vector<int>& fds,
                  const std::string& peer);
// Waits (bounded) for one record; received descriptors go to *fds (caller
// closes them). Unavailable if the peer closed.
Status ReceiveRecord(int fd, Deadline deadline, std::string* bytes, std::vector<int>* fds,
                     const std::string& peer);

}  // namespace shm
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SHM_SHM_HANDSHAKE_H_
