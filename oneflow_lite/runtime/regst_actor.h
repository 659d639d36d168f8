// RegstActor: the actor of every task kind that acts through an ActBody:
// the register protocol (RegstProtocol, regst_protocol.h) plus when a
// source acts, the deferral of messages on an asynchronous device, and the
// body's act.
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
// only enqueues work. Each edge says how its messages are ordered against
// that work (RegstDescProto.consumer_sync, written by the compiler; see
// docs/runtime.md, "Stream order"):
//   EDGE_STREAM_ORDER  producer and consumer share this stream: "produced"
//                      to the consumer and "returned" to the producer go out
//                      as soon as the act is enqueued. The consumer's reads
//                      are enqueued after the producer's writes, and a copy
//                      returned early is only rewritten by work enqueued
//                      after the consumer's reads on the same stream.
//   EDGE_EVENT / unset the message waits until the device says the act's
//                      work is done (OnStreamDone: an event on the stream).
// A deferred act keeps its EDGE_EVENT produced copies out and its EDGE_EVENT
// consumed registers held; the actor may meanwhile act again (its stream
// orders the work). "Produced" to a mutator after the readers returned is
// deferred the same way unless its edge is EDGE_STREAM_ORDER (readers that
// returned early ran on this stream, so the event covers their reads). The
// device's callback, on another thread, only records an error and posts a
// wake-up message (ActorMessage::Wakeup, kind kWakeup, tagged with the deferral) to the
// actor's own inbox; the actor sends the deferred messages, in deferral
// order, when it handles it. End-of-data waits until nothing is deferred. A
// failed completion fails the actor's Handle with an error naming the actor
// and the iteration.
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
#include "oneflow_lite/runtime/regst_protocol.h"
#include "proto/plan.pb.h"

namespace oflite {

class RegstActor final : public Actor {
 public:
  // `task` and `env` must outlive the actor. Fails (RegstProtocol::Init)
  // when a consumed register is unknown on this machine or a mutator is not
  // a consumer.
  static StatusOr<std::unique_ptr<RegstActor>> Create(const TaskProto& task, const ActorEnv& env,
                                                      std::unique_ptr<ActBody> body);

  int64_t id() const override { return protocol_.id(); }
  const std::string& name() const override { return task_->name(); }
  Status Handle(const ActorMessage& message) override;
  bool finished() const override { return finished_; }
  std::string DescribeWaiting() const override;
  int64_t act_count() const override { return protocol_.act_count(); }
  // Its body is a TracedActBody whenever a tracer is set (ActorRegistry).
  bool RecordsActs() const override { return true; }
  Status ReportDeferredErrors() override { return body_->ReportDeferredErrors(); }

 private:
  RegstActor(const TaskProto& task, const ActorEnv& env, std::unique_ptr<ActBody> body)
      : task_(&task), env_(&env), body_(std::move(body)), protocol_(task, env) {}

  // Messages that wait for the device work enqueued before them.
  struct Deferred {
    int64_t tag = 0;
    int64_t piece = 0;
    std::vector<ActorMessage> messages;
    bool done = false;
  };
  // Failed completions by act tag; written by device callbacks on other
  // threads, so shared with them and locked.
  struct CompletionErrors {
    std::mutex mutex;
    std::map<int64_t, Status> by_tag;
  };

  bool is_source() const { return !protocol_.has_local_inputs(); }
  Status HandleSlotMessage(const ActorMessage& message);
  bool ReadyToAct() const;
  Status ActOnce();
  bool async() const { return env_->device != nullptr && env_->device->IsAsync(); }
  // Sends each message now, or, when its edge needs the event, after the
  // device work enqueued so far for `piece` (DeferUntilDeviceDone).
  Status SendOrDefer(const std::vector<ActorMessage>& messages, int64_t piece);
  Status DeferUntilDeviceDone(int64_t piece, std::vector<ActorMessage> messages);
  Status OnDeviceDone(int64_t tag);
  Status MaybeFinish();

  const TaskProto* task_;
  const ActorEnv* env_;
  std::unique_ptr<ActBody> body_;
  RegstProtocol protocol_;
  bool started_ = false;
  int64_t next_piece_ = 0;  // sources only
  bool finished_ = false;
  std::vector<ActorMessage> outbox_;  // the messages of the act being completed
  ActContext act_;                    // the registers of the act being run
  std::deque<Deferred> in_flight_;  // deferral order
  int64_t next_tag_ = 0;
  std::shared_ptr<CompletionErrors> completion_errors_ = std::make_shared<CompletionErrors>();
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_REGST_ACTOR_H_
