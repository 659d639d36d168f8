// RegstProtocol: the actor protocol over register slots, written once for
// every actor kind (RegstActor, and the CommNet and collective actors of
// runtime/commnet/), apart from what an act does and when an actor decides
// to act.
//
// It owns one actor's register bookkeeping, built from its TaskProto:
//  * slots: every consumed register desc of this machine in ConsumedSlots
//    (a consumed desc named in `remote_inputs` gets none: the caller, a
//    CommNet actor, handles that remote input itself), every produced desc
//    in ProducedSlots with its readers and then its mutators (a mutator
//    must be one of the desc's consumers, else Init fails naming the task);
//  * produced / returned / end-of-data bookkeeping (OnProduced, OnReturned,
//    OnEndOfData), the registers of one act (ReadInputs, AcquireOutputs)
//    and the messages an act owes (CompleteAct: "produced" to every reader
//    of each output, "returned" to the producer of each local input);
//  * end-of-data, sent once when the caller's input is done and every local
//    input is drained, and finishing: Done() once end-of-data went out and
//    every produced copy is back;
//  * which edges are EDGE_STREAM_ORDER (StreamOrderedTo), for actors on an
//    asynchronous device that defer the others (RegstActor).
//
// The protocol never sends by itself: methods that owe messages append them
// to `*send`, in the order they must go out, and the caller sends them now
// (SendAll) or later (RegstActor defers some until its device work is
// done). Plain data owned by one actor and used only on its thread; `task`
// and `env` must outlive it.
#ifndef ONEFLOW_LITE_RUNTIME_REGST_PROTOCOL_H_
#define ONEFLOW_LITE_RUNTIME_REGST_PROTOCOL_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "oneflow_lite/runtime/register_slots.h"
#include "proto/plan.pb.h"

namespace oflite {

class RegstProtocol {
 public:
  RegstProtocol(const TaskProto& task, const ActorEnv& env)
      : task_(&task), env_(&env), id_(task.task_id()) {}
  RegstProtocol(const RegstProtocol&) = delete;
  RegstProtocol& operator=(const RegstProtocol&) = delete;

  // Builds the slots (see above). InvalidArgument, naming the task, when a
  // consumed register is unknown on this machine or a mutator of a produced
  // register is not one of its consumers. Call once, before anything else.
  Status Init(const std::set<int64_t>& remote_inputs = {});

  int64_t id() const { return id_; }
  const std::string& name() const { return task_->name(); }

  // True when `regst_desc_id` has a local consumed slot.
  bool Consumes(int64_t regst_desc_id) const { return consumed_.Consumes(regst_desc_id); }
  // No local input: the actor is a source (or only has a remote input).
  bool has_local_inputs() const { return !consumed_.empty(); }

  // A "produced" for a local input: the register joins its slot.
  // InvalidArgument when the register is unknown or not consumed here.
  Status OnProduced(const ActorMessage& message);
  // A consumer returned an output copy; appends "produced" to the mutators
  // that get the copy now (after its last reader returned it).
  // InvalidArgument on a return nobody owed.
  Status OnReturned(const ActorMessage& message, std::vector<ActorMessage>* send);
  // The producer of a local input ended it.
  Status OnEndOfData(const ActorMessage& message);

  // Every local input has a readable register / every output a free copy.
  bool InputsReadable() const { return consumed_.AllReadable(); }
  bool OutputsFree() const { return produced_.AllHaveFree(); }
  // The front readable register of a local input (CHECK: one is there).
  Regst* Front(int64_t regst_desc_id) const { return consumed_.Front(regst_desc_id); }

  // Fills context->consumed with the front register of every local input
  // and context->piece_id with their iteration; Internal error, naming the
  // actor, when they hold different iterations.
  Status ReadInputs(ActContext* context) const;
  // Takes a free copy of every output for `piece` into context->produced
  // (CHECK: OutputsFree()).
  void AcquireOutputs(int64_t piece, ActContext* context);
  // The act of `context` is done: pops the front of every local input (if
  // any) and appends "produced" for every output copy in `context`, then
  // "returned" for every popped input. Counts the act.
  void CompleteAct(const ActContext& context, std::vector<ActorMessage>* send);

  // Once `input_done` and every local input is drained: appends
  // end-of-data for every output to every consumer, once.
  void EndOfDataIfDrained(bool input_done, std::vector<ActorMessage>* send);
  bool end_of_data_sent() const { return end_of_data_sent_; }
  // End-of-data went out and every output copy is back.
  bool Done() const { return end_of_data_sent_ && produced_.AllFree(); }

  // Sends `messages` now, in order, through the actor env's bus.
  Status SendAll(const std::vector<ActorMessage>& messages) const;

  // Whether the edge of `regst_desc_id` to (or from) `peer` is marked
  // EDGE_STREAM_ORDER in the plan.
  bool StreamOrderedTo(int64_t regst_desc_id, int64_t peer) const {
    return stream_ordered_.count({regst_desc_id, peer}) > 0;
  }
  // The one output with blobs (null when every output is a control
  // register); InvalidArgument, naming the task, when there are two.
  StatusOr<const RegstDescProto*> SingleDataOutput() const;

  int64_t act_count() const { return act_count_; }
  // For the watchdog: "waiting for regst 7 from ...; " per missing input /
  // output copy still out.
  std::string DescribeInputs() const { return consumed_.DescribeMissing(); }
  std::string DescribeOutputs() const { return produced_.DescribeMissing(); }

 private:
  Status AddConsumed(const std::set<int64_t>& remote_inputs);
  Status AddProduced();

  const TaskProto* task_;
  const ActorEnv* env_;
  const int64_t id_;  // task_->task_id(), kept here: read on every act
  ConsumedSlots consumed_;
  ProducedSlots produced_;
  // Edges (regst desc id, peer task id) marked EDGE_STREAM_ORDER, produced
  // and consumed; fixed at Init.
  std::set<std::pair<int64_t, int64_t>> stream_ordered_;
  bool end_of_data_sent_ = false;
  int64_t act_count_ = 0;
  std::vector<Regst*> popped_;  // CompleteAct's scratch
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_REGST_PROTOCOL_H_
