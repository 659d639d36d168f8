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

#include "oneflow_lite/runtime/actor.h"
#include "proto/plan.pb.h"

namespace oflite {

class TracedActBody final : public ActBody {
 public:
  // `task` must outlive the body.
  TracedActBody(const TaskProto& task, std::unique_ptr<ActBody> inner);
  Status Act(ActContext* context) override;
  Status OnFinish(int64_t end_piece) override { return inner_->OnFinish(end_piece); }

 private:
  // The arguments formatted at once (those that depend on the registers).
  std::string Args(const ActContext& context) const;

  const TaskProto* task_;
  std::unique_ptr<ActBody> inner_;
  std::string ops_json_;  // ["op", ...]
  int64_t last_end_ns_ = 0;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_TRACED_ACT_BODY_H_
