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

#include <cstdint>
#include <map>
#include <string>

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

// The registers of one act, by regst desc id.
struct ActContext {
  int64_t piece_id = 0;                  // the iteration being computed
  std::map<int64_t, Regst*> consumed;    // front readable register per desc
  std::map<int64_t, Regst*> produced;    // the copy being written per desc
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
