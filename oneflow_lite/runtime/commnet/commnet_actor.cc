#include "oneflow_lite/runtime/commnet/commnet_actor.h"

#include <sstream>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/runtime/commnet/regst_payload.h"

namespace oflite {

StatusOr<std::unique_ptr<Actor>> CommNetActor::Create(const TaskProto& task, const ActorEnv& env,
                                                      CommNetRoute* route) {
  std::unique_ptr<CommNetActor> actor(new CommNetActor(task, env, route));
  RETURN_IF_ERROR(actor->Init());
  return std::unique_ptr<Actor>(std::move(actor));
}

Status CommNetActor::Init() {
  const CommNetConf& conf = task_->commnet();
  RETURN_IF_ERROR(protocol_.Init({conf.src_regst_desc_id()}));
  ASSIGN_OR_RETURN(data_out_, protocol_.SingleDataOutput());
  pulled_ = IsPulledByRead(conf.src_regst());
  transfers_.Init(env_->tracer, name());
  if (conf.src_regst().blob_size() > 0 && data_out_ == nullptr) {
    return InvalidArgumentError("commnet task '", name(), "' has no data register to fill");
  }
  return Status::OK();
}

std::string CommNetActor::DescribeWaiting() const {
  if (finished_) return "";
  std::ostringstream os;
  if (!end_of_data_) os << "data from " << TaskIdToString(task_->commnet().src_task_id()) << "; ";
  os << pending_.size() << " received; " << protocol_.DescribeInputs() << " "
     << protocol_.DescribeOutputs();
  return os.str();
}

Status CommNetActor::Handle(const ActorMessage& m) {
  const std::string what = "commnet actor '" + name() + "'";
  Status status;
  std::vector<ActorMessage> send;
  switch (m.kind) {
    case MessageKind::kStart:
      break;
    case MessageKind::kReadDone:
      status = FinishRead(m);
      break;
    case MessageKind::kReturned:
      status = protocol_.OnReturned(m, &send);
      if (status.ok()) status = protocol_.SendAll(send);
      break;
    case MessageKind::kProduced:
    case MessageKind::kEndOfData:
      if (!protocol_.Consumes(m.regst_desc_id)) {
        status = HandleRemote(m);
      } else if (m.kind == MessageKind::kProduced) {
        status = protocol_.OnProduced(m);
      } else {
        status = protocol_.OnEndOfData(m);
      }
      break;
    case MessageKind::kWakeup:
    case MessageKind::kAbort:
      return InvalidArgumentError(what, ": unexpected ", m.ToString());
  }
  RETURN_IF_ERROR(status.WithContext(what));
  return Pump().WithContext(what);
}

Status CommNetActor::HandleRemote(const ActorMessage& m) {
  if (m.src_actor_id != task_->commnet().src_task_id() ||
      m.regst_desc_id != task_->commnet().src_regst_desc_id()) {
    return InvalidArgumentError("unexpected ", m.ToString());
  }
  if (m.kind == MessageKind::kEndOfData) {
    end_of_data_ = true;
  } else if (pulled_) {
    pending_.push_back({m, std::string()});
  } else {
    ASSIGN_OR_RETURN(std::string payload, route_->TakePayload(m));
    pending_.push_back({m, std::move(payload)});
  }
  return Status::OK();
}

Status CommNetActor::Pump() {
  while (!reading_ && !pending_.empty() && protocol_.InputsReadable() &&
         protocol_.OutputsFree()) {
    RETURN_IF_ERROR(pulled_ ? StartRead() : CopyPushed());
  }
  std::vector<ActorMessage> end_of_data;
  protocol_.EndOfDataIfDrained(end_of_data_ && pending_.empty(), &end_of_data);
  RETURN_IF_ERROR(protocol_.SendAll(end_of_data));
  finished_ = protocol_.Done();
  return Status::OK();
}

// One READ in flight at a time, in arrival order.
Status CommNetActor::StartRead() {
  const ActorMessage& message = pending_.front().first;
  reading_context_ = ActContext();
  protocol_.AcquireOutputs(message.piece_id, &reading_context_);
  Regst* data = data_out_ == nullptr ? nullptr
                                     : reading_context_.produced.at(data_out_->regst_desc_id());
  reading_ = true;
  transfers_.Begin();
  return route_->StartRead(message, task_->commnet().src_regst(), data);
}

Status CommNetActor::FinishRead(const ActorMessage& completion) {
  if (!reading_ || pending_.empty() ||
      !(pending_.front().first.regst_index == completion.regst_index &&
        pending_.front().first.piece_id == completion.piece_id)) {
    return InternalError("READ completion without a READ in flight: ", completion.ToString());
  }
  RETURN_IF_ERROR(route_->TakeReadStatus(completion));
  const ActorMessage message = pending_.front().first;
  transfers_.End(message, task_->commnet().src_regst());
  pending_.pop_front();
  reading_ = false;
  return Complete(reading_context_, message);
}

Status CommNetActor::CopyPushed() {
  auto [message, payload] = std::move(pending_.front());
  pending_.pop_front();
  ActContext context;
  protocol_.AcquireOutputs(message.piece_id, &context);
  if (data_out_ != nullptr) {
    RETURN_IF_ERROR(DeserializeRegst(payload, context.produced.at(data_out_->regst_desc_id())));
  }
  return Complete(context, message);
}

Status CommNetActor::Complete(const ActContext& context, const ActorMessage& received) {
  std::vector<ActorMessage> send;
  protocol_.CompleteAct(context, &send);
  send.push_back(ActorMessage::Returned(id(), received.src_actor_id, received.regst_desc_id,
                                        received.regst_index, received.piece_id));
  return protocol_.SendAll(send);
}

}  // namespace oflite
