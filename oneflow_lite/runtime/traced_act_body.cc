#include "oneflow_lite/runtime/traced_act_body.h"

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/trace_messages.h"

namespace oflite {
namespace {

// ready_after and idle_before_us, at write time: numbers 0-5 the triggering
// message (MessageNumbers), 6 whether there is one, 7 the idle time in ns
// (negative: no previous act).
void FormatActArgs(const std::array<int64_t, 8>& numbers, std::string* out) {
  if (numbers[6] != 0) {
    *out += "\"ready_after\":\"" + trace::JsonEscape(DescribeTrigger(numbers)) + "\"";
  }
  if (numbers[7] >= 0) {
    *out += std::string(numbers[6] != 0 ? "," : "") +
            "\"idle_before_us\":" + std::to_string(numbers[7] / 1000);
  }
}

std::string RegstList(const std::map<int64_t, Regst*>& regsts) {
  std::string out = "\"";
  for (const auto& [desc_id, regst] : regsts) {
    if (out.size() > 1) out += ' ';
    out += "r" + std::to_string(desc_id) + "[" + std::to_string(regst->index) + "]";
  }
  return out + "\"";
}

}  // namespace

TracedActBody::TracedActBody(const TaskProto& task, std::unique_ptr<ActBody> inner)
    : task_(&task), inner_(std::move(inner)) {
  ops_json_ = "[";
  for (const KernelConf& kernel : task.kernel()) {
    if (ops_json_.size() > 1) ops_json_ += ',';
    ops_json_ += "\"" + trace::JsonEscape(kernel.op().name()) + "\"";
  }
  ops_json_ += "]";
}

Status TracedActBody::Act(ActContext* context) {
  trace::Track* track = trace::CurrentTrack();
  if (track == nullptr) return inner_->Act(context);
  trace::ScopedCurrentTrack in_window(track, context->piece_id);
  if (!track->active()) return inner_->Act(context);
  const int64_t begin_ns = trace::NowNs();
  Status status = inner_->Act(context);
  const int64_t end_ns = trace::NowNs();
  std::array<int64_t, 8> numbers{};
  if (const ActorMessage* trigger = HandledMessage()) {
    numbers = MessageNumbers(*trigger);
    numbers[6] = 1;
  }
  numbers[7] = last_end_ns_ > 0 ? begin_ns - last_end_ns_ : -1;
  track->AddSlice("act", task_->name(), begin_ns, end_ns, Args(*context), &FormatActArgs, numbers);
  last_end_ns_ = end_ns;
  return status;
}

std::string TracedActBody::Args(const ActContext& context) const {
  std::string args = "\"iteration\":" + std::to_string(context.piece_id) +
                     ",\"task\":" + std::to_string(task_->task_id()) + ",\"ops\":" + ops_json_ +
                     ",\"consumed\":" + RegstList(context.consumed) +
                     ",\"produced\":" + RegstList(context.produced);
  return args;
}

}  // namespace oflite
