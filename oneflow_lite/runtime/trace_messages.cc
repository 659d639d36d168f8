#include "oneflow_lite/runtime/trace_messages.h"

#include "oneflow_lite/common/id.h"

namespace oflite {
namespace {

thread_local const ActorMessage* handled_message = nullptr;
thread_local HandleTrace* current_handle = nullptr;  // the innermost HandleTrace

bool CrossesMachines(const ActorMessage& message) {
  return (message.kind == MessageKind::kProduced || message.kind == MessageKind::kReturned) &&
         message.src_actor_id >= 0 &&
         MachineOfTaskId(message.src_actor_id) != MachineOfTaskId(message.dst_actor_id);
}

// Produced, returned, and a READ's completion carry the register's
// iteration; a wake-up carries its actor's tag.
bool HasIteration(const ActorMessage& message) {
  return message.kind == MessageKind::kProduced || message.kind == MessageKind::kReturned ||
         message.kind == MessageKind::kReadDone;
}

ActorMessage FromNumbers(const int64_t* numbers) {
  ActorMessage message;
  message.kind = static_cast<MessageKind>(numbers[0]);
  message.src_actor_id = numbers[1];
  message.dst_actor_id = numbers[2];
  message.regst_desc_id = numbers[3];
  message.regst_index = static_cast<int32_t>(numbers[4]);
  message.piece_id = numbers[5];
  return message;
}

// The handle slice's arguments (see trace_messages.h), at write time.
void FormatHandleArgs(const trace::EventRecord& record, std::string* /*name*/,
                      std::string* out) {
  const ActorMessage message = FromNumbers(record.numbers());
  *out += "\"message\":\"" + trace::JsonEscape(DescribeTrigger(message)) +
          "\",\"actor\":" + std::to_string(message.dst_actor_id);
  if (message.src_actor_id >= 0) *out += ",\"from\":" + std::to_string(message.src_actor_id);
  // Not "iteration": a message of one iteration may let an act of another run.
  if (HasIteration(message)) {
    *out += ",\"message_iteration\":" + std::to_string(message.piece_id);
  }
  if (message.is_wakeup()) *out += ",\"wakeup_tag\":" + std::to_string(message.piece_id);
}

}  // namespace

uint64_t MessageFlowId(const ActorMessage& message) {
  return trace::FlowId({message.src_actor_id, message.dst_actor_id,
                        static_cast<int64_t>(message.kind), message.regst_desc_id,
                        message.regst_index, message.piece_id});
}

void MessageNumbers(const ActorMessage& message, int64_t* out) {
  out[0] = static_cast<int64_t>(message.kind);
  out[1] = message.src_actor_id;
  out[2] = message.dst_actor_id;
  out[3] = message.regst_desc_id;
  out[4] = message.regst_index;
  out[5] = message.piece_id;
}

const ActorMessage* HandledMessage() { return handled_message; }

std::string DescribeTrigger(const ActorMessage& message) {
  std::string text = MessageKindName(message.kind);
  if (message.is_wakeup()) return "wake-up (its asynchronous work finished)";
  if (message.regst_desc_id >= 0) {
    text += " r" + std::to_string(message.regst_desc_id) + "[" +
            std::to_string(message.regst_index) + "]";
  }
  if (message.piece_id >= 0) text += " iteration " + std::to_string(message.piece_id);
  if (message.src_actor_id >= 0) {
    text += message.kind == MessageKind::kReturned ? " by " : " from ";
    text += TaskIdToString(message.src_actor_id);
  }
  return text;
}

std::string DescribeTrigger(const int64_t* numbers) {
  return DescribeTrigger(FromNumbers(numbers));
}

void TraceMessageSentSlow(const ActorMessage& message) {
  trace::Track* track = trace::CurrentTrack();
  if (!CrossesMachines(message) || !track->InWindow(message.piece_id)) return;
  // Inside a handling the flow starts in its slice (begun now if needed).
  const int64_t now = current_handle != nullptr && current_handle->track() == track
                          ? current_handle->SliceFromNow()
                          : trace::NowNs();
  track->AddFlow('s', MessageFlowId(message), MessageKindName(message.kind), now);
}

int64_t HandleTrace::SliceFromNow() {
  if (!sliced_) {
    sliced_ = true;
    events_before_ = track_->event_count();
    begin_ns_ = trace::NowNs();
    return begin_ns_;
  }
  return trace::NowNs();
}

void HandleTrace::Begin(const ActorMessage& message, const std::string& actor_name,
                        trace::InternedName* name_memo, bool actor_records_acts) {
  track_ = trace::CurrentTrack();
  message_ = &message;
  actor_name_ = &actor_name;
  name_memo_ = name_memo;
  previous_message_ = handled_message;
  handled_message = &message;
  previous_handle_ = current_handle;
  current_handle = this;
  // A wake-up's tag is the iteration for a collective, an act count for an
  // asynchronous device's actor: either way a fair window test.
  in_window_ = message.kind != MessageKind::kEndOfData && message.piece_id >= 0 &&
               track_->InWindow(message.piece_id);
  was_active_ = track_->SetActive(in_window_);
  const bool crosses = CrossesMachines(message);
  sliced_ = track_->records_messages() || !actor_records_acts || crosses;
  if (!sliced_) return;
  events_before_ = track_->event_count();
  begin_ns_ = trace::NowNs();
  if (in_window_ && crosses) {
    track_->AddFlow('f', MessageFlowId(message), MessageKindName(message.kind), begin_ns_);
  }
}

void HandleTrace::End() {
  handled_message = previous_message_;
  current_handle = previous_handle_;
  track_->SetActive(was_active_);
  if (!sliced_) return;
  const int64_t end_ns = trace::NowNs();
  if (!in_window_ && track_->event_count() == events_before_) return;
  trace::EventRecord* event = track_->Append(kMessageNumbers);
  event->category = "handle";
  event->name = track_->Intern(*actor_name_, name_memo_);
  event->begin_ns = begin_ns_;
  event->end_ns = end_ns;
  event->format = &FormatHandleArgs;
  MessageNumbers(*message_, event->numbers());
}

}  // namespace oflite
