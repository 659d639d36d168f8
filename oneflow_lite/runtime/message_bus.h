// MessageBus: how an actor's message reaches the thread of its receiver.
//
// The seam between the runtime and CommNet. The runtime only calls
// MessageBus::Send. LocalMessageBus delivers to the Inbox of the receiver's
// thread, found by arithmetic on the bit-packed id (StreamKeyOfTaskId); a
// message whose receiver lives on another machine (MachineOfTaskId differs)
// goes to the RemoteRoute plugged in with SetRemoteRoute. CommNet implements
// RemoteRoute (encode with EncodeActorMessage, send over its message ring)
// and, on the receiving machine, hands decoded messages to DeliverLocal.
//
// Ordering contract: messages from one sender to one receiver arrive in the
// order they were sent (the actor protocol relies on it: an end-of-data
// message must not overtake the last produced message). A RemoteRoute must
// keep that per-(src, dst) order.
//
// Set-up (RegisterInbox, SetRemoteRoute) happens before any Send and is not
// thread-safe; Send and DeliverLocal are thread-safe afterwards. Inboxes and
// the route are not owned and must outlive the bus's use.
#ifndef ONEFLOW_LITE_RUNTIME_MESSAGE_BUS_H_
#define ONEFLOW_LITE_RUNTIME_MESSAGE_BUS_H_

#include <atomic>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/actor_message.h"
#include "oneflow_lite/runtime/inbox.h"

namespace oflite {

class MessageBus {
 public:
  virtual ~MessageBus() = default;
  // Routes `message` to message.dst_actor_id. Does not block on the
  // receiver. Fails with Unavailable when no route reaches the receiver.
  virtual Status Send(const ActorMessage& message) = 0;
};

// Carries messages to actors on other machines (implemented by CommNet).
class RemoteRoute {
 public:
  virtual ~RemoteRoute() = default;
  // Thread-safe; must not block indefinitely (bounded by the transport's
  // own timeouts); errors name the peer machine.
  virtual Status SendRemote(int64_t machine_id, const ActorMessage& message) = 0;
};

class LocalMessageBus final : public MessageBus {
 public:
  explicit LocalMessageBus(int64_t machine_id) : machine_id_(machine_id) {}

  // `stream_key` is StreamKeyOfTaskId of the actors the inbox serves.
  // Only while no other thread can send: before any sender exists, or
  // between BeginBuild and EndBuild.
  void RegisterInbox(int64_t stream_key, Inbox* inbox);
  // The runtime registers its inboxes between these. A send from another
  // thread meanwhile (an abort listener that an actor under construction
  // registered, run by a transport's progress thread when a peer is lost) is
  // refused with UNAVAILABLE instead of reading the table while it grows;
  // EndBuild publishes the table to every later sender.
  void BeginBuild() { building_.store(true, std::memory_order_relaxed); }
  void EndBuild() { building_.store(false, std::memory_order_release); }
  void SetRemoteRoute(RemoteRoute* route) { remote_ = route; }

  Status Send(const ActorMessage& message) override;
  // Delivers a message that arrived from another machine (or a local one).
  Status DeliverLocal(const ActorMessage& message);

  int64_t machine_id() const { return machine_id_; }
  // Messages Send routed so far (local and remote; refused ones do not
  // count); for benchmarks.
  // Counted where they land (by each inbox, and here for remote ones), so
  // that no counter is shared by the threads on every message.
  int64_t sent_count() const;

 private:
  Status Deliver(const ActorMessage& message, bool counted);

  const int64_t machine_id_;
  std::unordered_map<int64_t, Inbox*> inboxes_;
  // The same, for a scan: a machine has a handful of streams, and comparing
  // a few keys is cheaper than hashing one on every message. Empty when
  // there are too many streams (then the hash map answers).
  std::vector<std::pair<int64_t, Inbox*>> few_inboxes_;
  std::atomic<bool> building_{false};
  RemoteRoute* remote_ = nullptr;
  std::atomic<int64_t> sent_remote_{0};
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_MESSAGE_BUS_H_
