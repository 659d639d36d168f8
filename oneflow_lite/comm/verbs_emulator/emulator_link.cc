#include "oneflow_lite/comm/verbs_emulator/emulator_link.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "oneflow_lite/common/little_endian.h"

namespace oflite {
namespace verbs {
namespace emulator {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxDatagram = 64 * 1024;

// The abstract address of `slot` on `fabric` (sun_path[0] == 0: no file).
socklen_t SlotAddress(const std::string& fabric, int slot, sockaddr_un* out) {
  std::memset(out, 0, sizeof(*out));
  out->sun_family = AF_UNIX;
  std::string name = "oflite-verbs/" + fabric + "/" + std::to_string(slot);
  std::memcpy(out->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                name.size());
}

std::string Frame(uint64_t sequence, const std::string& body) {
  std::string datagram;
  little_endian::AppendU64(&datagram, sequence);
  datagram += body;
  return datagram;
}

// Receives one datagram into *datagram; recv's result (0: EOF).
ssize_t ReceiveDatagram(int fd, std::string* datagram, int flags) {
  datagram->resize(kMaxDatagram);
  ssize_t received = ::recv(fd, &(*datagram)[0], kMaxDatagram, flags);
  datagram->resize(received > 0 ? static_cast<size_t>(received) : 0);
  return received;
}

}  // namespace

Status CheckFabricName(const std::string& fabric) {
  bool valid = !fabric.empty() && fabric.size() <= 64;
  for (char c : fabric) {
    valid = valid && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                      c == '-');
  }
  if (valid) return Status::OK();
  return InvalidArgumentError("emulated fabric name '", fabric,
                              "' must be 1..64 characters of [A-Za-z0-9._-]");
}

StatusOr<std::unique_ptr<Link>> Link::Create(const std::string& fabric,
                                             Handler handler) {
  RETURN_IF_ERROR(CheckFabricName(fabric));
  int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    return UnavailableError("emulated fabric ", fabric,
                            ": eventfd: ", std::strerror(errno));
  }
  return std::unique_ptr<Link>(new Link(fabric, std::move(handler), wake_fd));
}

Link::Link(std::string fabric, Handler handler, int wake_fd)
    : fabric_(std::move(fabric)),
      handler_(std::move(handler)),
      wake_fd_(wake_fd),
      thread_([this] { Serve(); }) {}

Link::~Link() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  uint64_t one = 1;
  ssize_t written = ::write(wake_fd_, &one, sizeof(one));
  (void)written;
  thread_.join();
  for (auto& [slot, fd] : listeners_) ::close(fd);
  for (auto& [slot, fd] : connections_) ::close(fd);
  ::close(wake_fd_);
}

StatusOr<int> Link::Claim() {
  for (int slot = 1; slot <= kMaxSlot; ++slot) {
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      return UnavailableError("emulated fabric ", fabric_,
                              ": socket: ", std::strerror(errno));
    }
    sockaddr_un address;
    socklen_t length = SlotAddress(fabric_, slot, &address);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
      int error = errno;
      ::close(fd);
      if (error == EADDRINUSE) continue;  // another port owns this slot
      return UnavailableError("emulated fabric ", fabric_, ": bind slot ",
                              slot, ": ", std::strerror(error));
    }
    if (::listen(fd, 64) != 0) {
      int error = errno;
      ::close(fd);
      return UnavailableError("emulated fabric ", fabric_, ": listen: ",
                              std::strerror(error));
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      listeners_[slot] = fd;
    }
    uint64_t one = 1;
    ssize_t written = ::write(wake_fd_, &one, sizeof(one));
    (void)written;
    return slot;
  }
  return ResourceExhaustedError("emulated fabric ", fabric_, ": all ",
                                kMaxSlot, " slots are taken");
}

void Link::Serve() {
  std::map<int, Peer> accepted;  // by connected socket
  std::vector<pollfd> polled;
  while (true) {
    std::map<int, int> listening;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) break;
      listening = listeners_;
    }
    polled.assign(1, pollfd{wake_fd_, POLLIN, 0});
    for (auto& [slot, fd] : listening) polled.push_back({fd, POLLIN, 0});
    for (auto& [fd, peer] : accepted) polled.push_back({fd, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), 1000) <= 0) continue;
    if (polled[0].revents != 0) {
      uint64_t count;
      ssize_t drained = ::read(wake_fd_, &count, sizeof(count));
      (void)drained;
    }
    size_t index = 1;
    for (auto& [slot, fd] : listening) {
      if (polled[index++].revents != 0) Accept(fd, slot, &accepted);
    }
    for (; index < polled.size(); ++index) {
      if (polled[index].revents == 0) continue;
      int fd = polled[index].fd;
      const Peer& peer = accepted[fd];
      if (!ServeOne(fd, peer.slot, peer.sender)) {
        ::close(fd);
        accepted.erase(fd);
      }
    }
  }
  for (auto& [fd, peer] : accepted) ::close(fd);
}

void Link::Accept(int listen_fd, int slot, std::map<int, Peer>* accepted) {
  int connection = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (connection < 0) return;
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials,
                   &length) != 0 ||
      credentials.uid != ::geteuid()) {
    ::close(connection);  // only processes of this user share the fabric
    return;
  }
  (*accepted)[connection] = {slot, credentials.pid};
}

bool Link::ServeOne(int fd, int slot, pid_t sender) {
  std::string datagram;
  ssize_t received = ReceiveDatagram(fd, &datagram, MSG_DONTWAIT);
  if (received < 0) return errno == EAGAIN || errno == EINTR;
  if (received == 0) return false;  // the requester went away
  if (datagram.size() < 8) return false;
  uint64_t sequence = little_endian::LoadU64(
      reinterpret_cast<const uint8_t*>(datagram.data()));
  std::string reply = handler_(slot, sender, datagram.substr(8));
  std::string framed = Frame(sequence, reply);
  // The requester waits for this reply, so its receive buffer has room; a
  // requester that stopped reading loses the connection.
  return ::send(fd, framed.data(), framed.size(),
                MSG_DONTWAIT | MSG_NOSIGNAL) ==
         static_cast<ssize_t>(framed.size());
}

int Link::Connect(int slot) {
  auto it = connections_.find(slot);
  if (it != connections_.end()) return it->second;
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address;
  socklen_t length = SlotAddress(fabric_, slot, &address);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    ::close(fd);  // nobody owns the slot (or its owner is gone)
    return -1;
  }
  connections_[slot] = fd;
  return fd;
}

std::optional<std::string> Link::Exchange(int slot, const std::string& body,
                                          std::chrono::milliseconds wait) {
  int fd = Connect(slot);
  if (fd < 0) return std::nullopt;
  const uint64_t sequence = next_sequence_++;
  std::string framed = Frame(sequence, body);
  auto forget = [&] {
    ::close(fd);
    connections_.erase(slot);
    return std::nullopt;
  };
  if (::send(fd, framed.data(), framed.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(framed.size())) {
    return forget();
  }
  const Clock::time_point deadline = Clock::now() + wait;
  std::string datagram;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;  // lost; a late reply is skipped
    pollfd readable{fd, POLLIN, 0};
    int ready = ::poll(&readable, 1, static_cast<int>(left.count()) + 1);
    if (ready < 0 && errno != EINTR) return forget();
    if (ready <= 0) continue;
    if (ReceiveDatagram(fd, &datagram, 0) <= 0 || datagram.size() < 8) {
      return forget();  // the owner closed the connection or died
    }
    uint64_t answered = little_endian::LoadU64(
        reinterpret_cast<const uint8_t*>(datagram.data()));
    if (answered == sequence) return datagram.substr(8);
  }
}

}  // namespace emulator
}  // namespace verbs
}  // namespace oflite
