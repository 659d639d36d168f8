// CommNetActor (TASK_COMMNET, on the consumer's machine): brings a register
// produced on another machine into a register of this one.
//
// The remote producer (CommNetConf.src_task_id) sends "produced" for its
// register CommNetConf.src_regst_desc_id; that input has no local slot, this
// class queues it. For a register pulled by READ (IsPulledByRead,
// zero_copy_registry.h: static zero-copy or bounce buffers) the actor READs the
// remote copy into a free copy of its own data output (CommNetRoute::
// StartRead; one READ in flight, in arrival order; the route's kReadDone
// message resumes it); otherwise the message came with the register's valid
// bytes (pushed by CommNetRoute, TakePayload), copied into the output. Then
// it produces its outputs to its local consumers, returns its local inputs
// and returns the remote register to its producer. End-of-data from the
// producer is passed on once every received register was produced.
//
// The register protocol (local slots, returned, end-of-data, finishing)
// is RegstProtocol's. Runs on its actor's thread only (see actor.h); the
// task, env and route must outlive it.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTOR_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTOR_H_

#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"
#include "oneflow_lite/runtime/commnet/transfer_trace.h"
#include "oneflow_lite/runtime/regst_protocol.h"
#include "proto/plan.pb.h"

namespace oflite {

class CommNetActor final : public Actor {
 public:
  // InvalidArgument, naming the task, when its slots cannot be built or it
  // has no data output to fill for a source register with bytes.
  static StatusOr<std::unique_ptr<Actor>> Create(const TaskProto& task, const ActorEnv& env,
                                                 CommNetRoute* route);

  int64_t id() const override { return protocol_.id(); }
  const std::string& name() const override { return protocol_.name(); }
  Status Handle(const ActorMessage& message) override;
  bool finished() const override { return finished_; }
  std::string DescribeWaiting() const override;
  int64_t act_count() const override { return protocol_.act_count(); }

 private:
  CommNetActor(const TaskProto& task, const ActorEnv& env, CommNetRoute* route)
      : task_(&task), env_(&env), route_(route), protocol_(task, env) {}
  Status Init();
  Status HandleRemote(const ActorMessage& message);
  // Acts (or starts READs) while it can; then end-of-data and finishing.
  Status Pump();
  Status StartRead();
  Status FinishRead(const ActorMessage& completion);
  Status CopyPushed();
  // Produces the outputs of `context`, returns the local inputs and the
  // remote register `received`.
  Status Complete(const ActContext& context, const ActorMessage& received);

  const TaskProto* task_;
  const ActorEnv* env_;
  CommNetRoute* route_;
  RegstProtocol protocol_;
  const RegstDescProto* data_out_ = nullptr;  // the output with blobs, or null
  // Received "produced" messages and, when pushed, their payloads.
  std::deque<std::pair<ActorMessage, std::string>> pending_;
  bool end_of_data_ = false;  // the remote producer's
  bool pulled_ = false;       // registers pulled by READ (IsPulledByRead)
  bool reading_ = false;
  ActContext reading_context_;  // the outputs the READ in flight fills
  bool finished_ = false;
  TransferTrace transfers_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTOR_H_
