#include "oneflow_lite/comm/socket_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace oflite {
namespace comm {
namespace {

int MillisecondsLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count(), 1 << 30)));
}

// Waits for `events` on fd; false on timeout.
StatusOr<bool> WaitFor(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd poll_fd{fd, events, 0};
    int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return UnavailableError("poll: ", strerror(errno));
  }
}


}  // namespace

StatusOr<sockaddr_in> ResolveIpv4(const std::string& host, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1) return address;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || !result) {
    return InvalidArgumentError("cannot resolve host '", host, "'");
  }
  address.sin_addr = reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr;
  freeaddrinfo(result);
  return address;
}

Status ParseHostPort(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError("expected HOST:PORT, got '", text, "'");
  }
  *host = text.substr(0, colon);
  const std::string digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgumentError("bad port in '", text, "'");
  }
  *port = std::stoi(digits);
  if (*port < 1 || *port > 65535) {
    return InvalidArgumentError("port out of range in '", text, "'");
  }
  return Status::OK();
}

StatusOr<int> ListenTcp(const std::string& host, int* port) {
  ASSIGN_OR_RETURN(sockaddr_in address, ResolveIpv4(host, *port));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError("socket: ", strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) < 0 ||
      ::listen(fd, 128) < 0) {
    Status error = UnavailableError("listen on ", host, ":", *port, ": ",
                                    strerror(errno));
    ::close(fd);
    return error;
  }
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  *port = ntohs(address.sin_port);
  return fd;
}

Acceptor::Acceptor(int listen_fd) : listen_fd_(listen_fd) {
  const int flags = fcntl(listen_fd_, F_GETFL, 0);
  if (flags >= 0) fcntl(listen_fd_, F_SETFL, flags | O_NONBLOCK);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

Acceptor::~Acceptor() {
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

Acceptor::Result Acceptor::Accept(int* fd, std::string* peer) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  *fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length,
                  SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (*fd >= 0) {
    int one = 1;
    setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char text[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
    *peer = std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
    return Result::kAccepted;
  }
  switch (errno) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
      return Result::kEmpty;
    case EMFILE:
    case ENFILE:
      if (spare_fd_ >= 0) {
        ::close(spare_fd_);
        const int dropped = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (dropped >= 0) {
          ::close(dropped);
          ++shed_;
        }
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      }
      return Result::kBackOff;
    case ENOBUFS:
    case ENOMEM:
      return Result::kBackOff;
    default:  // ECONNABORTED, EINTR, EPROTO and network errors
      return Result::kRetry;
  }
}

StatusOr<int> DialTcp(const std::string& host, int port, Deadline deadline,
                      const std::string& peer) {
  ASSIGN_OR_RETURN(sockaddr_in address, ResolveIpv4(host, port));
  std::string last_error = "no attempt";
  do {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return UnavailableError("socket: ", strerror(errno));
    int result =
        ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    if (result < 0 && errno == EINPROGRESS) {
      ASSIGN_OR_RETURN(bool writable, WaitFor(fd, POLLOUT, deadline));
      int error = writable ? 0 : ETIMEDOUT;
      socklen_t length = sizeof(error);
      if (writable) getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      result = error == 0 ? 0 : -1;
      errno = error;
    }
    if (result == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    last_error = strerror(errno);
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (Clock::now() < deadline);
  return DeadlineExceededError("cannot reach ", peer, " at ", host, ":", port,
                               " before the deadline (last error: ",
                               last_error, ")");
}

StatusOr<int> AcceptTcp(int listen_fd, Deadline deadline) {
  ASSIGN_OR_RETURN(bool readable, WaitFor(listen_fd, POLLIN, deadline));
  if (!readable) return DeadlineExceededError("no connection arrived in time");
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return UnavailableError("accept: ", strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

Status WriteFull(int fd, const void* data, size_t size, Deadline deadline,
                 const std::string& peer) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t sent = ::send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      bytes += sent;
      size -= sent;
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      ASSIGN_OR_RETURN(bool writable, WaitFor(fd, POLLOUT, deadline));
      if (!writable) return DeadlineExceededError("sending to ", peer, " timed out");
      continue;
    }
    return UnavailableError("connection to ", peer, " lost: ", strerror(errno));
  }
  return Status::OK();
}

Status ReadFull(int fd, void* data, size_t size, Deadline deadline,
                const std::string& peer) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    ssize_t received = ::recv(fd, bytes, size, MSG_DONTWAIT);
    if (received > 0) {
      bytes += received;
      size -= received;
      continue;
    }
    if (received == 0) {
      return UnavailableError("connection to ", peer, " lost: closed by the peer");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ASSIGN_OR_RETURN(bool readable, WaitFor(fd, POLLIN, deadline));
      if (!readable) {
        return DeadlineExceededError("no answer from ", peer, " in time");
      }
      continue;
    }
    return UnavailableError("connection to ", peer, " lost: ", strerror(errno));
  }
  return Status::OK();
}

}  // namespace comm
}  // namespace oflite
