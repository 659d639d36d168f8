#include "oneflow_lite/runtime/traced_act_body.h"

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/trace_messages.h"

namespace oflite {
namespace {

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
  track->AddSlice("act", task_->name(), begin_ns, end_ns, Args(*context, begin_ns));
  last_end_ns_ = end_ns;
  return status;
}

std::string TracedActBody::Args(const ActContext& context, int64_t begin_ns) const {
  std::string args = "\"iteration\":" + std::to_string(context.piece_id) +
                     ",\"task\":" + std::to_string(task_->task_id()) + ",\"ops\":" + ops_json_ +
                     ",\"consumed\":" + RegstList(context.consumed) +
                     ",\"produced\":" + RegstList(context.produced);
  if (const ActorMessage* trigger = HandledMessage()) {
    args += ",\"ready_after\":\"" + trace::JsonEscape(DescribeTrigger(*trigger)) + "\"";
  }
  if (last_end_ns_ > 0) {
    args += ",\"idle_before_us\":" + std::to_string((begin_ns - last_end_ns_) / 1000);
  }
  return args;
}

}  // namespace oflite
