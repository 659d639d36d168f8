#include "oneflow_lite/runtime/traced_act_body.h"

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/trace_messages.h"

namespace oflite {
namespace {

// "r12[0] r14[1]" from `count` (desc, index) pairs.
void AppendRegstList(const int64_t* pairs, int64_t count, std::string* out) {
  *out += '"';
  for (int64_t i = 0; i < count; ++i) {
    if (i > 0) *out += ' ';
    *out += "r" + std::to_string(pairs[2 * i]) + "[" + std::to_string(pairs[2 * i + 1]) + "]";
  }
  *out += '"';
}

// The act slice's numbers: the iteration, the number of consumed
// registers, the idle time in ns (negative: no previous act), whether a
// triggering message follows (1) or not (0), that message's
// kMessageNumbers numbers if so, then (desc, index) of each consumed and
// each produced register. Text: the task id and ops.
constexpr size_t kActFixedNumbers = 4;

// The act slice's arguments, at write time.
void FormatActArgs(const trace::EventRecord& record, std::string* /*name*/, std::string* out) {
  const int64_t* numbers = record.numbers();
  const int64_t consumed = numbers[1];
  const bool has_trigger = numbers[3] != 0;
  const int64_t* pairs = numbers + kActFixedNumbers + (has_trigger ? kMessageNumbers : 0);
  const int64_t produced = (numbers + record.number_count - pairs) / 2 - consumed;
  *out += "\"iteration\":" + std::to_string(numbers[0]) + "," + *record.text + ",\"consumed\":";
  AppendRegstList(pairs, consumed, out);
  *out += ",\"produced\":";
  AppendRegstList(pairs + 2 * consumed, produced, out);
  if (has_trigger) {
    const int64_t* trigger = numbers + kActFixedNumbers;
    *out += ",\"ready_after\":\"" + trace::JsonEscape(DescribeTrigger(trigger)) + "\"";
    // The sender, as a number (`oflite trace summary` follows it when the
    // trace has no handle slice around the act: --trace-level acts).
    if (trigger[1] >= 0) *out += ",\"ready_from\":" + std::to_string(trigger[1]);
  }
  if (numbers[2] >= 0) *out += ",\"idle_before_us\":" + std::to_string(numbers[2] / 1000);
}

int64_t* AppendRegsts(const RegstMap& regsts, int64_t* out) {
  for (const auto& [desc_id, regst] : regsts) {
    *out++ = desc_id;
    *out++ = regst->index;
  }
  return out;
}

}  // namespace

TracedActBody::TracedActBody(const TaskProto& task, std::unique_ptr<ActBody> inner)
    : task_(&task), inner_(std::move(inner)) {
  fixed_args_ = "\"task\":" + std::to_string(task.task_id()) + ",\"ops\":[";
  for (int i = 0; i < task.kernel_size(); ++i) {
    if (i > 0) fixed_args_ += ',';
    fixed_args_ += "\"" + trace::JsonEscape(task.kernel(i).op().name()) + "\"";
  }
  fixed_args_ += "]";
}

Status TracedActBody::Act(ActContext* context) {
  trace::Track* track = trace::CurrentTrack();
  if (track == nullptr) return inner_->Act(context);
  trace::ScopedCurrentTrack in_window(track, context->piece_id);
  if (!track->active()) return inner_->Act(context);
  const int64_t begin_ns = trace::NowNs();
  Status status = inner_->Act(context);
  const int64_t end_ns = trace::NowNs();
  Record(track, *context, begin_ns, end_ns);
  last_end_ns_ = end_ns;
  return status;
}

void TracedActBody::Record(trace::Track* track, const ActContext& context, int64_t begin_ns,
                           int64_t end_ns) {
  if (track != interned_on_) {  // the strings live in the track they are used on
    interned_on_ = track;
    name_ = track->Intern(task_->name());
    fixed_args_interned_ = track->Intern(fixed_args_);
  }
  const ActorMessage* trigger = HandledMessage();
  const size_t regsts = context.consumed.size() + context.produced.size();
  const size_t trigger_numbers = trigger != nullptr ? kMessageNumbers : 0;
  trace::EventRecord* event = track->Append(kActFixedNumbers + trigger_numbers + 2 * regsts);
  event->category = "act";
  event->name = name_;
  event->begin_ns = begin_ns;
  event->end_ns = end_ns;
  event->text = fixed_args_interned_;
  event->format = &FormatActArgs;
  int64_t* numbers = event->numbers();
  numbers[0] = context.piece_id;
  numbers[1] = static_cast<int64_t>(context.consumed.size());
  numbers[2] = last_end_ns_ > 0 ? begin_ns - last_end_ns_ : -1;
  numbers[3] = trigger != nullptr ? 1 : 0;
  if (trigger != nullptr) MessageNumbers(*trigger, numbers + kActFixedNumbers);
  AppendRegsts(context.produced,
               AppendRegsts(context.consumed, numbers + kActFixedNumbers + trigger_numbers));
}

}  // namespace oflite
