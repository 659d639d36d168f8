// Small blocking-socket helpers with deadlines, for the control plane and
// tools (the TCP provider's data path is nonblocking and lives in tcp/).
// Every function is bounded by its deadline and returns a Status naming
// `peer` (e.g. "rank 3" or "master 10.0.0.1:29500") on failure. Thread-safe
// (no shared state); a socket must not be used by two callers at once.
#ifndef ONEFLOW_LITE_COMM_SOCKET_UTIL_H_
#define ONEFLOW_LITE_COMM_SOCKET_UTIL_H_

#include <netinet/in.h>

#include <string>

#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

// "host:port" -> parts. Port must be 1..65535.
Status ParseHostPort(const std::string& text, std::string* host, int* port);

// An IPv4 address for `host` (dotted quad or a name, via getaddrinfo) and
// `port`; InvalidArgument naming the host if it does not resolve. Blocks on
// name resolution.
StatusOr<sockaddr_in> ResolveIpv4(const std::string& host, int port);

// A listening IPv4 socket; *port receives the bound port (0 picks one).
StatusOr<int> ListenTcp(const std::string& host, int* port);

// Connects, retrying refused connections every 50 ms until the deadline.
StatusOr<int> DialTcp(const std::string& host, int port, Deadline deadline,
                      const std::string& peer);

// Accepts one connection, or DeadlineExceeded.
StatusOr<int> AcceptTcp(int listen_fd, Deadline deadline);

// Accepts from a listening socket without spinning at the file-descriptor
// limit. It keeps one spare descriptor (of /dev/null): when accept() fails
// with EMFILE or ENFILE it frees the spare, accepts the oldest waiting
// connection, closes it at once (the peer sees its connection closed instead
// of waiting in the kernel's queue), and takes the spare back. The caller
// should then stop polling the listener for kAcceptBackoff, which bounds the
// CPU spent while descriptors stay short; accepting works again as soon as
// descriptors free up. Does not own the listening socket, which it makes
// nonblocking. One thread at a time; not thread-safe.
constexpr std::chrono::milliseconds kAcceptBackoff{100};

class Acceptor {
 public:
  enum class Result {
    kAccepted,  // *fd is a new nonblocking, close-on-exec socket
    kEmpty,     // nothing waiting
    kRetry,     // a transient failure (the peer gave up first); call again
    kBackOff,   // descriptors or memory ran out; back off kAcceptBackoff
  };

  explicit Acceptor(int listen_fd);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // One accept. On kAccepted, *peer is "a.b.c.d:port" of the remote end.
  Result Accept(int* fd, std::string* peer);
  // Connections dropped because descriptors ran out, so far.
  int64_t shed() const { return shed_; }

 private:
  int listen_fd_;
  int spare_fd_ = -1;
  int64_t shed_ = 0;
};

Status WriteFull(int fd, const void* data, size_t size, Deadline deadline,
                 const std::string& peer);
Status ReadFull(int fd, void* data, size_t size, Deadline deadline,
                const std::string& peer);

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SOCKET_UTIL_H_
