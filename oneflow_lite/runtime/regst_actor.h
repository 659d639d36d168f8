// RegstActor: the actor protocol over register slots, with the act itself
// delegated to an ActBody.
//
// An actor acts when every consumed desc has a readable register and every
// produced desc has a free copy. An actor that consumes nothing is a source:
// after kStart it acts once per piece in [env.start_iter, env.end_iter),
// as fast as free copies allow (regst_num bounds how far it runs ahead).
// After an act it sends "produced" to every consumer of each produced
// register and "returned" to the producer of each consumed one. When all its
// input is drained (a source: after its last piece) it sends end-of-data to
// its consumers once; it is finished when every produced copy is back.
//
// Asynchronous devices (env.device->IsAsync(), e.g. a CUDA stream): an act
// only enqueues work, so the actor defers its "produced" and "returned"
// messages until the device says the work is done. The produced copies stay
// out (not readable by consumers) and the consumed registers stay held (not
// returned to their producers) until then; the actor may meanwhile act again
// on the next registers (its stream orders the work). The device's callback,
// on another thread, only records an error and posts a wake-up message
// (ActorMessage::Wakeup, tagged with the act) to the actor's own inbox; the
// actor sends the deferred messages, in act order, when it handles it.
// End-of-data waits until nothing is in flight. A failed completion fails
// the actor's Handle with an error naming the actor and the iteration.
//
// Used on one thread (see actor.h). Not copyable.
#ifndef ONEFLOW_LITE_RUNTIME_REGST_ACTOR_H_
#define ONEFLOW_LITE_RUNTIME_REGST_ACTOR_H_

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "oneflow_lite/runtime/register_slots.h"
#include "proto/plan.pb.h"

namespace oflite {

class RegstActor final : public Actor {
 public:
  // `task` and `env` must outlive the actor. Fails when a consumed register
  // is unknown on this machine.
  static StatusOr<std::unique_ptr<RegstActor>> Create(const TaskProto& task, const ActorEnv& env,
                                                      std::unique_ptr<ActBody> body);

  int64_t id() const override { return task_->task_id(); }
  const std::string& name() const override { return task_->name(); }
  Status Handle(const ActorMessage& message) override;
  bool finished() const override { return finished_; }
  std::string DescribeWaiting() const override;
  int64_t act_count() const override { return act_count_; }

 private:
  RegstActor(const TaskProto& task, const ActorEnv& env, std::unique_ptr<ActBody> body)
      : task_(&task), env_(&env), body_(std::move(body)) {}

  // An act whose device work was enqueued and has not finished yet.
  struct InFlightAct {
    int64_t tag = 0;
    ActContext context;
    std::vector<Regst*> consumed;
    bool done = false;
  };
  // Failed completions by act tag; written by device callbacks on other
  // threads, so shared with them and locked.
  struct CompletionErrors {
    std::mutex mutex;
    std::map<int64_t, Status> by_tag;
  };

  bool is_source() const { return consumed_.empty(); }
  bool ReadyToAct() const;
  Status ActOnce();
  Status DeferUntilDeviceDone(ActContext context, std::vector<Regst*> consumed);
  Status OnDeviceDone(int64_t tag);
  Status SendProduced(const ActContext& context);
  Status SendReturned(const std::vector<Regst*>& consumed);
  Status MaybeFinish();

  const TaskProto* task_;
  const ActorEnv* env_;
  std::unique_ptr<ActBody> body_;
  ConsumedSlots consumed_;
  ProducedSlots produced_;
  bool started_ = false;
  int64_t next_piece_ = 0;  // sources only
  int64_t act_count_ = 0;
  bool end_of_data_sent_ = false;
  bool finished_ = false;
  std::deque<InFlightAct> in_flight_;  // act order
  int64_t next_tag_ = 0;
  std::shared_ptr<CompletionErrors> completion_errors_ = std::make_shared<CompletionErrors>();
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_REGST_ACTOR_H_
