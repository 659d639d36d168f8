// TracedActBody: an ActBody that records each act of the body it wraps as
// an "act" slice on the thread's trace track (docs/tracing.md), named by the
// task, with the iteration, the ops, the consumed and produced registers,
// the message that made the act possible ("ready_after") and how long the
// actor had been idle since its previous act ("idle_before_us": the gap
// before it, and its reason). The kernels run inside it record their own
// slices. The registry wraps bodies in it only when the run is traced
// (ActorEnv.tracer), so an untraced run never sees it. Used on the actor's
// thread only, like the body it wraps.
#ifndef ONEFLOW_LITE_RUNTIME_TRACED_ACT_BODY_H_
#define ONEFLOW_LITE_RUNTIME_TRACED_ACT_BODY_H_

#include <memory>
#include <string>

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/actor.h"
#include "proto/plan.pb.h"

namespace oflite {

// Cache-line aligned: last_end_ns_, written by every act, shares no line
// with another actor's body, which another thread may write.
class alignas(64) TracedActBody final : public ActBody {
 public:
  // `task` must outlive the body.
  TracedActBody(const TaskProto& task, std::unique_ptr<ActBody> inner);
  Status Act(ActContext* context) override;
  Status OnFinish(int64_t end_piece) override { return inner_->OnFinish(end_piece); }
  Status ReportDeferredErrors() override { return inner_->ReportDeferredErrors(); }

 private:
  // Appends the act's slice to `track`: numbers only, formatted when the
  // trace is written.
  void Record(trace::Track* track, const ActContext& context, int64_t begin_ns, int64_t end_ns);

  const TaskProto* task_;
  std::unique_ptr<ActBody> inner_;
  std::string fixed_args_;  // "task":id,"ops":["op", ...]
  int64_t last_end_ns_ = 0;
  // The task's name and fixed_args_ as interned by `interned_on_` (the
  // track of the thread the actor runs on).
  trace::Track* interned_on_ = nullptr;
  const std::string* name_ = nullptr;
  const std::string* fixed_args_interned_ = nullptr;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_TRACED_ACT_BODY_H_
