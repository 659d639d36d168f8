// Actor: one task of the plan, bound to one runtime thread.
//
// The runtime's view of an actor is this small interface: feed it messages,
// ask whether it is finished, ask what it waits on. The protocol
// (register slots, produced/returned/end-of-data messages, finishing) lives
// once in RegstProtocol (regst_protocol.h), which every actor kind composes:
// RegstActor (regst_actor.h), whose act is an ActBody chosen by task type
// (actor_registry.h), and the CommNet and collective actors of
// runtime/commnet/. All methods run on the actor's thread,
// except where noted; an actor is never used from two threads at once.
#ifndef ONEFLOW_LITE_RUNTIME_ACTOR_H_
#define ONEFLOW_LITE_RUNTIME_ACTOR_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/actor_message.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

class Actor {
 public:
  virtual ~Actor() = default;
  virtual int64_t id() const = 0;
  virtual const std::string& name() const = 0;
  // Processes one message; may act any number of times and send messages.
  // An error stops the run (the runtime aborts every actor).
  virtual Status Handle(const ActorMessage& message) = 0;
  // True once the actor has sent end-of-data and all its registers are back.
  virtual bool finished() const = 0;
  // What the actor is blocked on, for the watchdog ("" when finished).
  virtual std::string DescribeWaiting() const = 0;
  // Acts performed so far.
  virtual int64_t act_count() const = 0;
  // Whether its acts appear in a trace as act slices (an act body wrapped
  // by TracedActBody); the others (CommNet, collectives) show only their
  // message handling, which the trace then always records (HandleTrace).
  virtual bool RecordsActs() const { return false; }
  // Called once the actor's stream has finished all its work at the end of
  // a successful run (after finished()): an error its kernels found on the
  // device and have not reported yet (Kernel::ReportDeferredErrors).
  virtual Status ReportDeferredErrors() { return Status::OK(); }
};

// Registers by regst desc id, in ascending id order: a sorted vector, since
// an act has a handful of registers and is built on every act. Once its
// capacity has grown, filling it again after clear() allocates nothing.
class RegstMap {
 public:
  using value_type = std::pair<int64_t, Regst*>;
  using const_iterator = std::vector<value_type>::const_iterator;

  // The slot of `desc_id`, inserted (null) in id order when absent.
  Regst*& operator[](int64_t desc_id) {
    // Acts fill it in id order: appending is the common case.
    if (entries_.empty() || entries_.back().first < desc_id) {
      entries_.emplace_back(desc_id, nullptr);
      return entries_.back().second;
    }
    auto it = LowerBound(desc_id);
    if (it == entries_.end() || it->first != desc_id) it = entries_.insert(it, {desc_id, nullptr});
    return it->second;
  }
  const_iterator find(int64_t desc_id) const {
    auto it = LowerBound(desc_id);
    return it != entries_.end() && it->first == desc_id ? it : entries_.end();
  }
  // CHECK-fails when absent (like std::map::at's throw, a caller's bug).
  Regst* at(int64_t desc_id) const {
    auto it = find(desc_id);
    CHECK(it != entries_.end()) << "no register " << desc_id << " in this act";
    return it->second;
  }
  size_t count(int64_t desc_id) const { return find(desc_id) != entries_.end() ? 1 : 0; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }

 private:
  std::vector<value_type>::iterator LowerBound(int64_t desc_id) {
    return std::lower_bound(entries_.begin(), entries_.end(), desc_id,
                            [](const value_type& e, int64_t id) { return e.first < id; });
  }
  const_iterator LowerBound(int64_t desc_id) const {
    return std::lower_bound(entries_.begin(), entries_.end(), desc_id,
                            [](const value_type& e, int64_t id) { return e.first < id; });
  }

  std::vector<value_type> entries_;
};

// The registers of one act, by regst desc id.
struct ActContext {
  int64_t piece_id = 0;  // the iteration being computed
  RegstMap consumed;     // front readable register per desc
  RegstMap produced;     // the copy being written per desc

  // For reuse from act to act without allocating.
  void Reset() {
    piece_id = 0;
    consumed.clear();
    produced.clear();
  }
};

// What an actor does when it acts; one per task type (compute, source,
// variable, sink, copy, boxing). Runs on the actor's thread.
class ActBody {
 public:
  virtual ~ActBody() = default;
  virtual Status Act(ActContext* context) = 0;
  // After the actor's last act, once all its registers are back (e.g. a
  // variable saves its final value).
  virtual Status OnFinish(int64_t end_piece) { return Status::OK(); }
  // After the stream drained at the end of the run: the first error the
  // body's kernels found on the device and have not reported yet.
  virtual Status ReportDeferredErrors() { return Status::OK(); }
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_ACTOR_H_
