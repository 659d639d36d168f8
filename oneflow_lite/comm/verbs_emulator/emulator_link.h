// Internal to the verbs emulator: the "cable" between processes that joined
// one named fabric (VerbsEmulator::Join). Each emulated port of this process
// owns a slot of the fabric, claimed by binding the abstract unix socket
// "oflite-verbs/<fabric>/<slot>" (SOCK_SEQPACKET): the first process to bind
// a slot owns it, and the kernel frees the name when the socket closes or the
// process dies, so nothing is left behind (no file, nothing in /dev/shm). The
// slot is the port's LID (InfiniBand) and is encoded in its GIDs (RoCE).
//
// A requester sends one packet per work request to the slot that owns the
// destination and waits for one reply (Exchange); the owner's link thread
// hands each packet to the fabric's handler together with the sender's
// process id, taken from SO_PEERCRED (never from the packet), so the handler
// can move bytes with process_vm_readv/writev. Only processes of the same
// user are served. A slot nobody owns, a connection that breaks, or a reply
// that does not come within the wait is reported as "no reply": the packet
// was lost on the wire, and the requester's retry logic takes over.
//
// Framing: every packet and reply is one datagram, [u64 sequence][body]
// little-endian; replies carry the sequence of their packet, and a late reply
// to an abandoned packet is discarded.
//
// Thread-safety: Claim may be called from any thread. Exchange is
// called by one thread only (the fabric's engine): it owns the connection
// cache. The handler runs on the link's own thread, never inside Exchange.
#ifndef ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_LINK_H_
#define ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_LINK_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace verbs {
namespace emulator {

constexpr int kMaxSlot = 4096;

// OK unless `fabric` is not 1..64 characters of [A-Za-z0-9._-].
Status CheckFabricName(const std::string& fabric);

class Link {
 public:
  // Answers one packet (body without the sequence) addressed to `slot`, sent
  // by process `sender`; returns the reply body.
  using Handler =
      std::function<std::string(int slot, pid_t sender, const std::string&)>;

  // InvalidArgument unless `fabric` is 1..64 characters of [A-Za-z0-9._-];
  // Unavailable when the link's thread cannot be set up.
  static StatusOr<std::unique_ptr<Link>> Create(const std::string& fabric,
                                                Handler handler);
  ~Link();  // stops the thread, closes every socket (releasing the slots)
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Claims the lowest free slot (1..kMaxSlot) and starts serving it until
  // the link is destroyed. ResourceExhausted when every slot is taken.
  StatusOr<int> Claim();

  // Sends `body` to the owner of `slot` and waits up to `wait` for the reply.
  // nullopt: lost (no owner, broken connection, no reply in time). Engine
  // thread only.
  std::optional<std::string> Exchange(int slot, const std::string& body,
                                      std::chrono::milliseconds wait);

  const std::string& fabric() const { return fabric_; }

 private:
  Link(std::string fabric, Handler handler, int wake_fd);
  struct Peer {  // an accepted connection
    int slot;      // the port it reached
    pid_t sender;  // from SO_PEERCRED
  };
  void Serve();
  void Accept(int listen_fd, int slot, std::map<int, Peer>* accepted);
  bool ServeOne(int fd, int slot, pid_t sender);  // false: close it
  int Connect(int slot);

  const std::string fabric_;
  const Handler handler_;
  const int wake_fd_;  // eventfd: Claim and stop wake the thread

  std::mutex mutex_;              // guards listeners_ and stopping_
  std::map<int, int> listeners_;  // slot -> listening socket
  bool stopping_ = false;

  // Engine thread only.
  std::map<int, int> connections_;  // slot -> connected socket
  uint64_t next_sequence_ = 1;

  std::thread thread_;  // last: started after every member is initialized
};

}  // namespace emulator
}  // namespace verbs
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_VERBS_EMULATOR_EMULATOR_LINK_H_
