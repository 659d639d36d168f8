#include "oneflow_lite/comm/shm/shm_handshake.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "oneflow_lite/comm/shm/shm_segment.h"
#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace shm {
namespace {

constexpr uint32_t kHelloMagic = 0x4c48464f;  // "OFHL"
constexpr uint32_t kAckMagic = 0x4b41464f;    // "OFAK"
constexpr size_t kMaxRecord = 512;
constexpr int kMaxFds = 4;

socklen_t AbstractAddress(const std::string& name, sockaddr_un* address) {
  std::memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  const size_t length = std::min(name.size(), sizeof(address->sun_path) - 1);
  std::memcpy(address->sun_path + 1, name.data(), length);  // sun_path[0] = 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
}

int MillisecondsUntil(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

}  // namespace

std::string EncodeEndpoint(const Endpoint& endpoint) {
  std::string out;
  wire::AppendU32(&out, kShmVersion);
  wire::AppendU32(&out, endpoint.rank);
  wire::AppendU64(&out, endpoint.pid);
  wire::AppendU64(&out, endpoint.nonce);
  wire::AppendBytes(&out, endpoint.socket_name);
  return out;
}

StatusOr<Endpoint> DecodeEndpoint(const std::string& bytes) {
  wire::Reader reader(bytes.data(), bytes.size());
  Endpoint endpoint;
  uint32_t version = 0;
  reader.ReadU32(&version);
  reader.ReadU32(&endpoint.rank);
  reader.ReadU64(&endpoint.pid);
  reader.ReadU64(&endpoint.nonce);
  reader.ReadBytes(&endpoint.socket_name, 100);
  RETURN_IF_ERROR(reader.status("shm endpoint"));
  if (version != kShmVersion) {
    return FailedPreconditionError("shm endpoint version ", version, " (this build speaks ",
                                   kShmVersion, ")");
  }
  return endpoint;
}

std::string EncodeHello(const Hello& hello) {
  std::string out;
  wire::AppendU32(&out, kHelloMagic);
  wire::AppendU32(&out, kShmVersion);
  wire::AppendU32(&out, hello.rank);
  wire::AppendU32(&out, hello.world_size);
  wire::AppendU32(&out, hello.slots);
  wire::AppendU32(&out, hello.slot_size);
  wire::AppendU64(&out, hello.dialer_nonce);
  wire::AppendU64(&out, hello.acceptor_nonce);
  return out;
}

StatusOr<Hello> DecodeHello(const std::string& bytes) {
  wire::Reader reader(bytes.data(), bytes.size());
  uint32_t magic = 0, version = 0;
  Hello hello;
  reader.ReadU32(&magic);
  reader.ReadU32(&version);
  reader.ReadU32(&hello.rank);
  reader.ReadU32(&hello.world_size);
  reader.ReadU32(&hello.slots);
  reader.ReadU32(&hello.slot_size);
  reader.ReadU64(&hello.dialer_nonce);
  reader.ReadU64(&hello.acceptor_nonce);
  RETURN_IF_ERROR(reader.status("shm HELLO"));
  if (magic != kHelloMagic || version != kShmVersion) {
    return PermissionDeniedError("shm HELLO with magic 0x", std::hex, magic, std::dec, " version ",
                                 version);
  }
  return hello;
}

std::string EncodeHelloAck(const HelloAck& ack) {
  std::string out;
  wire::AppendU32(&out, kAckMagic);
  wire::AppendU32(&out, kShmVersion);
  wire::AppendU32(&out, ack.rank);
  wire::AppendBytes(&out, ack.error);
  return out;
}

StatusOr<HelloAck> DecodeHelloAck(const std::string& bytes) {
  wire::Reader reader(bytes.data(), bytes.size());
  uint32_t magic = 0, version = 0;
  HelloAck ack;
  reader.ReadU32(&magic);
  reader.ReadU32(&version);
  reader.ReadU32(&ack.rank);
  reader.ReadBytes(&ack.error, 400);
  RETURN_IF_ERROR(reader.status("shm HELLO_ACK"));
  if (magic != kAckMagic || version != kShmVersion) {
    return PermissionDeniedError("shm HELLO_ACK with magic 0x", std::hex, magic, std::dec,
                                 " version ", version);
  }
  return ack;
}

StatusOr<int> ListenAbstract(std::string* name) {
  std::random_device random;
  const uint64_t tag = (uint64_t{random()} << 32) | random();
  *name = "oflite-shm/" + std::to_string(::getpid()) + "/" + std::to_string(tag);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return UnavailableError("shm listener: socket: ", std::strerror(errno));
  sockaddr_un address;
  const socklen_t length = AbstractAddress(*name, &address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd, 128) != 0) {
    const int error = errno;
    ::close(fd);
    return UnavailableError("shm listener on @", *name, ": ", std::strerror(error));
  }
  return fd;
}

StatusOr<int> DialAbstract(const std::string& name, Deadline deadline, const std::string& peer) {
  sockaddr_un address;
  const socklen_t length = AbstractAddress(name, &address);
  while (true) {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return UnavailableError("dialing ", peer, ": socket: ", std::strerror(errno));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0) return fd;
    const int error = errno;
    ::close(fd);
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("dialing ", peer, " at @", name, ": ", std::strerror(error),
                                   " (not on this host, or in another network namespace?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

StatusOr<pid_t> PeerPid(int fd) {
  ucred credentials;
  socklen_t length = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return UnavailableError("SO_PEERCRED: ", std::strerror(errno));
  }
  return credentials.pid;
}

Status SendRecord(int fd, const std::string& bytes, const std::vector<int>& fds,
                  const std::string& peer) {
  CHECK_LE(fds.size(), size_t{kMaxFds});
  iovec data{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  if (!fds.empty()) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  if (::sendmsg(fd, &message, MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    return UnavailableError("shm handshake with ", peer, ": send: ", std::strerror(errno));
  }
  return Status::OK();
}

Status ReceiveRecord(int fd, Deadline deadline, std::string* bytes, std::vector<int>* fds,
                     const std::string& peer) {
  pollfd ready{fd, POLLIN, 0};
  const int polled = ::poll(&ready, 1, MillisecondsUntil(deadline));
  if (polled == 0) return DeadlineExceededError("shm handshake with ", peer, ": no answer");
  if (polled < 0) return UnavailableError("shm handshake with ", peer, ": ", std::strerror(errno));
  char buffer[kMaxRecord];
  iovec data{buffer, sizeof(buffer)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t got = ::recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); got >= 0 && header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      fds->push_back(received);
    }
  }
  if (got < 0) return UnavailableError("shm handshake with ", peer, ": ", std::strerror(errno));
  if (got == 0) return UnavailableError("shm handshake with ", peer, ": connection closed");
  if (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    return PermissionDeniedError("shm handshake with ", peer, ": oversized record");
  }
  bytes->assign(buffer, static_cast<size_t>(got));
  return Status::OK();
}

}  // namespace shm
}  // namespace comm
}  // namespace oflite
