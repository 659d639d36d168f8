#include "oneflow_lite/runtime/regst_protocol.h"

#include <algorithm>

#include "oneflow_lite/common/edge_sync.h"
#include "oneflow_lite/common/id.h"

namespace oflite {

Status RegstProtocol::Init(const std::set<int64_t>& remote_inputs) {
  RETURN_IF_ERROR(AddConsumed(remote_inputs));
  return AddProduced();
}

Status RegstProtocol::AddConsumed(const std::set<int64_t>& remote_inputs) {
  for (const ConsumedRegst& consumed : task_->consumed()) {
    for (int64_t desc_id : consumed.regst_desc_id()) {
      if (remote_inputs.count(desc_id) > 0) continue;
      const RegstDescProto* desc = env_->regsts->FindDesc(desc_id);
      if (desc == nullptr) {
        return InvalidArgumentError("task '", name(), "' consumes register ", desc_id, " ('",
                                    consumed.name(), "') that no task of this machine "
                                    "produces");
      }
      consumed_.AddDesc(desc_id, desc->producer_task_id());
      for (int k = 0; k < desc->consumer_task_id_size(); ++k) {
        if (desc->consumer_task_id(k) == id() && ConsumerSyncAt(*desc, k) == EDGE_STREAM_ORDER) {
          stream_ordered_.emplace(desc_id, desc->producer_task_id());
        }
      }
    }
  }
  return Status::OK();
}

Status RegstProtocol::AddProduced() {
  for (const RegstDescProto& desc : task_->produced()) {
    std::vector<Regst*> copies;
    for (int32_t i = 0; i < desc.regst_num(); ++i) {
      copies.push_back(env_->regsts->Get(desc.regst_desc_id(), i));
    }
    const auto& consumers = desc.consumer_task_id();
    std::vector<int64_t> mutators(desc.mutator_task_id().begin(), desc.mutator_task_id().end());
    std::vector<int64_t> readers;
    for (int64_t consumer : consumers) {
      if (std::find(mutators.begin(), mutators.end(), consumer) == mutators.end()) {
        readers.push_back(consumer);
      }
    }
    for (int64_t mutator : mutators) {
      if (std::find(consumers.begin(), consumers.end(), mutator) == consumers.end()) {
        return InvalidArgumentError("task '", name(), "': mutator ", TaskIdToString(mutator),
                                    " of register ", desc.regst_desc_id(),
                                    " is not one of its consumers");
      }
    }
    for (int k = 0; k < desc.consumer_task_id_size(); ++k) {
      if (ConsumerSyncAt(desc, k) == EDGE_STREAM_ORDER) {
        stream_ordered_.emplace(desc.regst_desc_id(), desc.consumer_task_id(k));
      }
    }
    produced_.AddDesc(desc.regst_desc_id(), std::move(copies), std::move(readers),
                      std::move(mutators));
  }
  return Status::OK();
}

Status RegstProtocol::OnProduced(const ActorMessage& message) {
  ASSIGN_OR_RETURN(Regst * regst, env_->regsts->Find(message.regst_desc_id, message.regst_index));
  return consumed_.OnProduced(regst);
}

Status RegstProtocol::OnReturned(const ActorMessage& message, std::vector<ActorMessage>* send) {
  std::vector<int64_t> send_to;
  RETURN_IF_ERROR(produced_.OnReturned(message.regst_desc_id, message.regst_index, &send_to));
  for (int64_t consumer : send_to) {
    send->push_back(ActorMessage::Produced(id(), consumer, message.regst_desc_id,
                                           message.regst_index, message.piece_id));
  }
  return Status::OK();
}

Status RegstProtocol::OnEndOfData(const ActorMessage& message) {
  return consumed_.OnEndOfData(message.regst_desc_id);
}

Status RegstProtocol::ReadInputs(ActContext* context) const {
  bool first = true;
  for (size_t i = 0; i < consumed_.size(); ++i) {
    const int64_t desc_id = consumed_.desc_at(i);
    Regst* regst = consumed_.front_at(i);
    context->consumed[desc_id] = regst;
    if (first) context->piece_id = regst->piece_id;
    if (regst->piece_id != context->piece_id) {
      return InternalError("actor '", name(), "': inputs of different iterations (register ",
                           desc_id, " holds piece ", regst->piece_id, ", another holds ",
                           context->piece_id, ")");
    }
    first = false;
  }
  return Status::OK();
}

void RegstProtocol::AcquireOutputs(int64_t piece, ActContext* context) {
  context->piece_id = piece;
  // From the slots, not the task's proto: one array, already in id order.
  produced_.AcquireAll([piece, context](int64_t desc_id, Regst* regst) {
    regst->piece_id = piece;
    context->produced[desc_id] = regst;
  });
}

void RegstProtocol::CompleteAct(const ActContext& context, std::vector<ActorMessage>* send) {
  ++act_count_;
  std::vector<Regst*>& consumed = popped_;  // kept: no allocation per act
  consumed.clear();
  if (has_local_inputs()) consumed_.PopFronts(&consumed);
  for (const auto& [desc_id, regst] : context.produced) {
    for (int64_t consumer : produced_.MarkProduced(regst)) {
      send->push_back(
          ActorMessage::Produced(id(), consumer, desc_id, regst->index, regst->piece_id));
    }
  }
  for (Regst* regst : consumed) {
    send->push_back(ActorMessage::Returned(id(), regst->producer_id, regst->desc_id, regst->index,
                                           regst->piece_id));
  }
}

void RegstProtocol::EndOfDataIfDrained(bool input_done, std::vector<ActorMessage>* send) {
  if (end_of_data_sent_ || !input_done || !consumed_.AllDrained()) return;
  end_of_data_sent_ = true;
  for (const RegstDescProto& desc : task_->produced()) {
    for (int64_t consumer : desc.consumer_task_id()) {
      send->push_back(ActorMessage::EndOfData(id(), consumer, desc.regst_desc_id()));
    }
  }
}

Status RegstProtocol::SendAll(const std::vector<ActorMessage>& messages) const {
  for (const ActorMessage& message : messages) RETURN_IF_ERROR(env_->bus->Send(message));
  return Status::OK();
}

StatusOr<const RegstDescProto*> RegstProtocol::SingleDataOutput() const {
  const RegstDescProto* data = nullptr;
  for (const RegstDescProto& desc : task_->produced()) {
    if (desc.blob_size() == 0) continue;
    if (data != nullptr) {
      return InvalidArgumentError("task '", name(), "' produces two data registers (",
                                  data->regst_desc_id(), " and ", desc.regst_desc_id(), ")");
    }
    data = &desc;
  }
  return data;
}

}  // namespace oflite
