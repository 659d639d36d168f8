#include "oneflow_lite/runtime/regst_actor.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "oneflow_lite/common/edge_sync.h"
#include "oneflow_lite/common/id.h"

namespace oflite {

StatusOr<std::unique_ptr<RegstActor>> RegstActor::Create(const TaskProto& task,
                                                         const ActorEnv& env,
                                                         std::unique_ptr<ActBody> body) {
  std::unique_ptr<RegstActor> actor(new RegstActor(task, env, std::move(body)));
  for (const ConsumedRegst& consumed : task.consumed()) {
    for (int64_t desc_id : consumed.regst_desc_id()) {
      const RegstDescProto* desc = env.regsts->FindDesc(desc_id);
      if (desc == nullptr) {
        return InvalidArgumentError("task '", task.name(), "' consumes register ", desc_id,
                                    " ('", consumed.name(), "') that no task of this machine "
                                    "produces");
      }
      actor->consumed_.AddDesc(desc_id, desc->producer_task_id());
      for (int k = 0; k < desc->consumer_task_id_size(); ++k) {
        if (desc->consumer_task_id(k) == task.task_id() &&
            ConsumerSyncAt(*desc, k) == EDGE_STREAM_ORDER) {
          actor->stream_ordered_.emplace(desc_id, desc->producer_task_id());
        }
      }
    }
  }
  for (const RegstDescProto& desc : task.produced()) {
    std::vector<Regst*> copies;
    for (int32_t i = 0; i < desc.regst_num(); ++i) {
      copies.push_back(env.regsts->Get(desc.regst_desc_id(), i));
    }
    std::vector<int64_t> readers;
    std::vector<int64_t> mutators(desc.mutator_task_id().begin(), desc.mutator_task_id().end());
    for (int64_t consumer : desc.consumer_task_id()) {
      if (std::find(mutators.begin(), mutators.end(), consumer) == mutators.end()) {
        readers.push_back(consumer);
      }
    }
    for (int64_t mutator : mutators) {
      if (std::find(desc.consumer_task_id().begin(), desc.consumer_task_id().end(), mutator) ==
          desc.consumer_task_id().end()) {
        return InvalidArgumentError("task '", task.name(), "': mutator ",
                                    TaskIdToString(mutator), " of register ",
                                    desc.regst_desc_id(), " is not one of its consumers");
      }
    }
    for (int k = 0; k < desc.consumer_task_id_size(); ++k) {
      if (ConsumerSyncAt(desc, k) == EDGE_STREAM_ORDER) {
        actor->stream_ordered_.emplace(desc.regst_desc_id(), desc.consumer_task_id(k));
      }
    }
    actor->produced_.AddDesc(desc.regst_desc_id(), std::move(copies), std::move(readers),
                             std::move(mutators));
  }
  actor->next_piece_ = env.start_iter;
  return actor;
}

Status RegstActor::Handle(const ActorMessage& message) {
  switch (message.kind) {
    case MessageKind::kStart:
      if (message.is_wakeup()) {
        RETURN_IF_ERROR(OnDeviceDone(message.piece_id));
      } else {
        started_ = true;
      }
      break;
    case MessageKind::kProduced: {
      ASSIGN_OR_RETURN(Regst * regst,
                       env_->regsts->Find(message.regst_desc_id, message.regst_index));
      RETURN_IF_ERROR(consumed_.OnProduced(regst).WithContext("actor '" + name() + "'"));
      break;
    }
    case MessageKind::kReturned: {
      std::vector<int64_t> send_to;
      RETURN_IF_ERROR(produced_.OnReturned(message.regst_desc_id, message.regst_index, &send_to)
                          .WithContext("actor '" + name() + "'"));
      // The mutators, once every reader returned the copy.
      std::vector<ActorMessage> later;
      for (int64_t consumer : send_to) {
        RETURN_IF_ERROR(SendOrDefer(ActorMessage::Produced(id(), consumer, message.regst_desc_id,
                                                           message.regst_index, message.piece_id),
                                    message.regst_desc_id, consumer, &later));
      }
      if (!later.empty()) RETURN_IF_ERROR(DeferUntilDeviceDone(message.piece_id, std::move(later)));
      break;
    }
    case MessageKind::kEndOfData:
      RETURN_IF_ERROR(
          consumed_.OnEndOfData(message.regst_desc_id).WithContext("actor '" + name() + "'"));
      break;
  }
  while (ReadyToAct()) RETURN_IF_ERROR(ActOnce());
  return MaybeFinish();
}

bool RegstActor::ReadyToAct() const {
  if (end_of_data_sent_) return false;
  if (is_source()) {
    return started_ && next_piece_ < env_->end_iter && produced_.AllHaveFree();
  }
  return consumed_.AllReadable() && produced_.AllHaveFree();
}

Status RegstActor::ActOnce() {
  ActContext context;
  if (is_source()) {
    context.piece_id = next_piece_++;
  } else {
    bool first = true;
    for (const auto& [desc_id, producer] : consumed_.producers()) {
      Regst* regst = consumed_.Front(desc_id);
      context.consumed[desc_id] = regst;
      if (first) context.piece_id = regst->piece_id;
      if (regst->piece_id != context.piece_id) {
        return InternalError("actor '", name(), "': inputs of different iterations (register ",
                             desc_id, " holds piece ", regst->piece_id, ", another holds ",
                             context.piece_id, ")");
      }
      first = false;
    }
  }
  for (const RegstDescProto& desc : task_->produced()) {
    Regst* regst = produced_.Acquire(desc.regst_desc_id());
    regst->piece_id = context.piece_id;
    context.produced[desc.regst_desc_id()] = regst;
  }
  RETURN_IF_ERROR(body_->Act(&context).WithContext("actor '" + name() + "'"));
  ++act_count_;
  std::vector<Regst*> consumed;
  if (!is_source()) consumed = consumed_.PopFronts();
  std::vector<ActorMessage> later;
  RETURN_IF_ERROR(SendProduced(context, &later));
  RETURN_IF_ERROR(SendReturned(consumed, &later));
  if (later.empty()) return Status::OK();
  return DeferUntilDeviceDone(context.piece_id, std::move(later));
}

bool RegstActor::StreamOrderedTo(int64_t regst_desc_id, int64_t peer) const {
  return stream_ordered_.count({regst_desc_id, peer}) > 0;
}

Status RegstActor::SendOrDefer(ActorMessage message, int64_t regst_desc_id, int64_t peer,
                               std::vector<ActorMessage>* later) {
  if (async() && !StreamOrderedTo(regst_desc_id, peer)) {
    later->push_back(std::move(message));
    return Status::OK();
  }
  // Stream order (or a synchronous device): the data is there, or will be
  // before any work the receiver enqueues next.
  return env_->bus->Send(message);
}

Status RegstActor::DeferUntilDeviceDone(int64_t piece, std::vector<ActorMessage> messages) {
  const int64_t tag = next_tag_++;
  in_flight_.push_back(Deferred{tag, piece, std::move(messages), false});
  MessageBus* bus = env_->bus;
  const int64_t self = id();
  std::shared_ptr<CompletionErrors> errors = completion_errors_;
  const std::string label = name();
  Status status = env_->device->OnStreamDone(label, [bus, self, tag, errors,
                                                     label](const Status& done) {
    if (!done.ok()) {
      std::lock_guard<std::mutex> lock(errors->mutex);
      errors->by_tag.emplace(tag, done);
    }
    // A closed inbox (the run is aborting) drops the wake-up, as intended.
    Status sent = bus->Send(ActorMessage::Wakeup(self, tag));
    if (!sent.ok()) {
      std::fprintf(stderr, "actor '%s': cannot post its device completion: %s\n", label.c_str(),
                   sent.ToString().c_str());
    }
  });
  return status.WithContext("actor '" + name() + "', iteration " + std::to_string(piece) +
                            ": waiting for its device work");
}

Status RegstActor::OnDeviceDone(int64_t tag) {
  auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                         [tag](const Deferred& deferred) { return deferred.tag == tag; });
  if (it == in_flight_.end() || it->done) {
    return InternalError("actor '", name(), "': device completion ", tag,
                         " matches no act in flight");
  }
  Status failed;
  {
    std::lock_guard<std::mutex> lock(completion_errors_->mutex);
    auto error = completion_errors_->by_tag.find(tag);
    if (error != completion_errors_->by_tag.end()) {
      failed = error->second;
      completion_errors_->by_tag.erase(error);
    }
  }
  if (!failed.ok()) {
    return failed.WithContext("actor '" + name() + "': device work of iteration " +
                              std::to_string(it->piece) + " failed");
  }
  it->done = true;
  // Streams finish in order; still, release strictly in deferral order.
  while (!in_flight_.empty() && in_flight_.front().done) {
    for (const ActorMessage& message : in_flight_.front().messages) {
      RETURN_IF_ERROR(env_->bus->Send(message));
    }
    in_flight_.pop_front();
  }
  return Status::OK();
}

Status RegstActor::SendProduced(const ActContext& context, std::vector<ActorMessage>* later) {
  for (const auto& [desc_id, regst] : context.produced) {
    for (int64_t consumer : produced_.MarkProduced(regst)) {
      RETURN_IF_ERROR(SendOrDefer(
          ActorMessage::Produced(id(), consumer, desc_id, regst->index, regst->piece_id), desc_id,
          consumer, later));
    }
  }
  return Status::OK();
}

Status RegstActor::SendReturned(const std::vector<Regst*>& consumed,
                                std::vector<ActorMessage>* later) {
  for (Regst* regst : consumed) {
    const int64_t producer = regst->desc->producer_task_id();
    const int64_t desc_id = regst->desc->regst_desc_id();
    RETURN_IF_ERROR(SendOrDefer(
        ActorMessage::Returned(id(), producer, desc_id, regst->index, regst->piece_id), desc_id,
        producer, later));
  }
  return Status::OK();
}

Status RegstActor::MaybeFinish() {
  if (finished_ || !in_flight_.empty()) return Status::OK();
  if (!end_of_data_sent_) {
    const bool done = is_source() ? (started_ && next_piece_ >= env_->end_iter)
                                  : consumed_.AllDrained();
    if (!done) return Status::OK();
    end_of_data_sent_ = true;
    for (const RegstDescProto& desc : task_->produced()) {
      for (int64_t consumer : desc.consumer_task_id()) {
        RETURN_IF_ERROR(
            env_->bus->Send(ActorMessage::EndOfData(id(), consumer, desc.regst_desc_id())));
      }
    }
  }
  if (!produced_.AllFree()) return Status::OK();
  finished_ = true;
  return body_->OnFinish(env_->end_iter).WithContext("actor '" + name() + "'");
}

std::string RegstActor::DescribeWaiting() const {
  if (finished_) return "";
  std::ostringstream os;
  os << "actor '" << name() << "' (" << TaskIdToString(id()) << ", " << act_count_
     << " acts): ";
  if (is_source() && !started_) os << "not started; ";
  if (!in_flight_.empty()) {
    os << in_flight_.size() << " act(s) waiting for their device stream (iterations "
       << in_flight_.front().piece << ".." << in_flight_.back().piece
       << "); ";
  }
  if (!end_of_data_sent_) os << consumed_.DescribeMissing();
  os << produced_.DescribeMissing();
  if (end_of_data_sent_) os << "finishing, registers still out; ";
  return os.str();
}

}  // namespace oflite
