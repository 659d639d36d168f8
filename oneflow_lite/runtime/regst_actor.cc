#include "oneflow_lite/runtime/regst_actor.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "oneflow_lite/common/id.h"

namespace oflite {

StatusOr<std::unique_ptr<RegstActor>> RegstActor::Create(const TaskProto& task,
                                                         const ActorEnv& env,
                                                         std::unique_ptr<ActBody> body) {
  std::unique_ptr<RegstActor> actor(new RegstActor(task, env, std::move(body)));
  RETURN_IF_ERROR(actor->protocol_.Init());
  actor->next_piece_ = env.start_iter;
  return actor;
}

Status RegstActor::Handle(const ActorMessage& message) {
  switch (message.kind) {
    case MessageKind::kStart:
      started_ = true;
      break;
    case MessageKind::kWakeup:
      RETURN_IF_ERROR(OnDeviceDone(message.piece_id));
      break;
    case MessageKind::kProduced:
    case MessageKind::kReturned:
    case MessageKind::kEndOfData:
      RETURN_IF_ERROR(HandleSlotMessage(message));
      break;
    case MessageKind::kReadDone:
    case MessageKind::kAbort:
      return InternalError("actor '", name(), "': unexpected ", message.ToString());
  }
  while (ReadyToAct()) RETURN_IF_ERROR(ActOnce());
  return MaybeFinish();
}

Status RegstActor::HandleSlotMessage(const ActorMessage& message) {
  Status status;
  std::vector<ActorMessage> send;
  if (message.kind == MessageKind::kProduced) {
    status = protocol_.OnProduced(message);
  } else if (message.kind == MessageKind::kEndOfData) {
    status = protocol_.OnEndOfData(message);
  } else {
    // Returned: the mutators get the copy once every reader returned it.
    status = protocol_.OnReturned(message, &send);
  }
  // The context only on failure: no string per message on the hot path.
  if (!status.ok()) return status.WithContext("actor '" + name() + "'");
  return send.empty() ? Status::OK() : SendOrDefer(send, message.piece_id);
}

bool RegstActor::ReadyToAct() const {
  if (protocol_.end_of_data_sent()) return false;
  if (is_source()) {
    return started_ && next_piece_ < env_->end_iter && protocol_.OutputsFree();
  }
  return protocol_.InputsReadable() && protocol_.OutputsFree();
}

Status RegstActor::ActOnce() {
  ActContext& context = act_;  // reused: no allocation per act once warm
  context.Reset();
  if (is_source()) {
    context.piece_id = next_piece_++;
  } else {
    RETURN_IF_ERROR(protocol_.ReadInputs(&context));
  }
  protocol_.AcquireOutputs(context.piece_id, &context);
  Status acted = body_->Act(&context);
  // The context only on failure: no string per act on the hot path.
  if (!acted.ok()) return acted.WithContext("actor '" + name() + "'");
  outbox_.clear();  // reused: no allocation per act once warm
  protocol_.CompleteAct(context, &outbox_);
  return SendOrDefer(outbox_, context.piece_id);
}

Status RegstActor::SendOrDefer(const std::vector<ActorMessage>& messages, int64_t piece) {
  std::vector<ActorMessage> later;
  for (const ActorMessage& message : messages) {
    if (async() && !protocol_.StreamOrderedTo(message.regst_desc_id, message.dst_actor_id)) {
      later.push_back(message);
      continue;
    }
    // Stream order (or a synchronous device): the data is there, or will be
    // before any work the receiver enqueues next.
    RETURN_IF_ERROR(env_->bus->Send(message));
  }
  if (later.empty()) return Status::OK();
  return DeferUntilDeviceDone(piece, std::move(later));
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

Status RegstActor::MaybeFinish() {
  if (finished_ || !in_flight_.empty()) return Status::OK();
  const bool input_done = !is_source() || (started_ && next_piece_ >= env_->end_iter);
  std::vector<ActorMessage> end_of_data;
  protocol_.EndOfDataIfDrained(input_done, &end_of_data);
  RETURN_IF_ERROR(protocol_.SendAll(end_of_data));
  if (!protocol_.Done()) return Status::OK();
  finished_ = true;
  return body_->OnFinish(env_->end_iter).WithContext("actor '" + name() + "'");
}

std::string RegstActor::DescribeWaiting() const {
  if (finished_) return "";
  std::ostringstream os;
  os << "actor '" << name() << "' (" << TaskIdToString(id()) << ", " << act_count()
     << " acts): ";
  if (is_source() && !started_) os << "not started; ";
  if (!in_flight_.empty()) {
    os << in_flight_.size() << " act(s) waiting for their device stream (iterations "
       << in_flight_.front().piece << ".." << in_flight_.back().piece
       << "); ";
  }
  if (!protocol_.end_of_data_sent()) os << protocol_.DescribeInputs();
  os << protocol_.DescribeOutputs();
  if (protocol_.end_of_data_sent()) os << "finishing, registers still out; ";
  return os.str();
}

}  // namespace oflite
