// Tracing of actor messages (common/trace/trace.h; docs/tracing.md): the
// runtime's side of the timeline, kept out of the actor protocol.
//
// HandleTrace wraps one message's handling on a stream thread: a "handle"
// slice named by the actor, with the message as arguments, recorded when the
// message's iteration is in the window or when anything was recorded inside
// it (an act, a flow). Unless the track records every message
// (Track::records_messages, --trace-level messages), only the handling of
// a message that crossed machines or reached an actor that records no acts
// (CommNet, collectives: its handling is all the trace shows of it) gets a
// slice; for the others the act slice says which message let it run, and
// nothing is read or written (not even the clock) for those that let none
// run, unless the handling sends a message to another machine (a producer
// whose register a remote CommNet actor pulls): its slice then starts at
// that send, so the flow's start lies inside a slice, where trace viewers
// draw the arrow from. A produced or returned message that crossed machines
// ends a flow there; TraceMessageSent starts it on the sender (the CommNet
// route calls it), both ends computing the same id from the message.
// Everything is a no-op on a thread without a trace track (tracing off):
// one null check. Use on the thread that handles or sends the message.
#ifndef ONEFLOW_LITE_RUNTIME_TRACE_MESSAGES_H_
#define ONEFLOW_LITE_RUNTIME_TRACE_MESSAGES_H_

#include <cstdint>
#include <string>

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/actor_message.h"

namespace oflite {

class HandleTrace {
 public:
  // `message` and `actor_name` must outlive this object; `name_memo` (the
  // caller's, one per actor, used on this thread only) keeps the name
  // interned on the track, so the name's text must not change.
  // `actor_records_acts`: the actor records act slices (Actor::RecordsActs).
  HandleTrace(const ActorMessage& message, const std::string& actor_name,
              trace::InternedName* name_memo, bool actor_records_acts) {
    if (trace::CurrentTrack() != nullptr) {
      Begin(message, actor_name, name_memo, actor_records_acts);
    }
  }
  ~HandleTrace() {
    if (track_ != nullptr) End();
  }
  HandleTrace(const HandleTrace&) = delete;
  HandleTrace& operator=(const HandleTrace&) = delete;

  // The handling's slice starts now if it had none (see the header
  // comment); returns the current time (its begin time if it starts now).
  // For TraceMessageSentSlow.
  int64_t SliceFromNow();
  trace::Track* track() const { return track_; }

 private:
  void Begin(const ActorMessage& message, const std::string& actor_name,
             trace::InternedName* name_memo, bool actor_records_acts);
  void End();

  trace::Track* track_ = nullptr;
  const ActorMessage* message_ = nullptr;
  const ActorMessage* previous_message_ = nullptr;
  HandleTrace* previous_handle_ = nullptr;
  const std::string* actor_name_ = nullptr;
  trace::InternedName* name_memo_ = nullptr;
  bool in_window_ = false;
  bool sliced_ = false;  // this handling may get a slice (see the header comment)
  bool was_active_ = false;
  size_t events_before_ = 0;
  int64_t begin_ns_ = 0;
};

// The message the calling thread is handling (inside a HandleTrace), or null.
const ActorMessage* HandledMessage();

// "produced r12[1] iteration 5 from m1/cpu0/s0/3": why an act could run.
std::string DescribeTrigger(const ActorMessage& message);
// How many numbers MessageNumbers writes.
constexpr size_t kMessageNumbers = 6;
// A message's fields as a trace event's deferred numbers: writes
// kMessageNumbers of them to `out`.
void MessageNumbers(const ActorMessage& message, int64_t* out);
// The same as above from the kMessageNumbers numbers at `numbers` (for
// arguments formatted at write time).
std::string DescribeTrigger(const int64_t* numbers);

// A flow start for `message` when it goes to another machine (produced or
// returned, iteration in the window) on the calling thread's track.
void TraceMessageSentSlow(const ActorMessage& message);
inline void TraceMessageSent(const ActorMessage& message) {
  if (trace::CurrentTrack() != nullptr) TraceMessageSentSlow(message);
}

// The flow id both ends of `message` compute.
uint64_t MessageFlowId(const ActorMessage& message);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_TRACE_MESSAGES_H_
