#include "oneflow_lite/api/job_util.h"

#include <queue>

namespace oflite {

BlobDescMap BlobDescsOf(const Job& job) {
  BlobDescMap descs;
  for (const LogicalBlobDesc& blob : job.blob()) descs[blob.lbn()] = TensorDesc(blob.desc());
  return descs;
}

void SetBlobDescs(const BlobDescMap& descs, Job* job) {
  job->clear_blob();
  for (const auto& [lbn, desc] : descs) {  // std::map: sorted by lbn
    LogicalBlobDesc* blob = job->add_blob();
    blob->set_lbn(lbn);
    *blob->mutable_desc() = desc.ToProto();
  }
}

StatusOr<ArgDescs> InputDescsOf(const OpConf& op, const BlobDescMap& descs) {
  ArgDescs inputs;
  for (const ArgProto& arg : op.input()) {
    for (const std::string& lbn : arg.lbn()) {
      auto it = descs.find(lbn);
      if (it == descs.end()) {
        return NotFoundError("op '", op.name(), "' (", op.op_type(), "): input '", arg.name(),
                             "' reads blob '", lbn, "', which no earlier op produces");
      }
      inputs[arg.name()].push_back(it->second);
    }
  }
  return inputs;
}

Status InferAndRecord(const OpConf& op, BlobDescMap* descs) {
  ASSIGN_OR_RETURN(ArgDescs inputs, InputDescsOf(op, *descs));
  ASSIGN_OR_RETURN(ArgDescs outputs, InferOp(op, inputs));
  for (const ArgProto& arg : op.output()) {
    auto it = outputs.find(arg.name());
    if (it == outputs.end()) {
      return InvalidArgumentError("op '", op.name(), "' (", op.op_type(), "): declares output '",
                                  arg.name(), "', which the op type does not have");
    }
    if (static_cast<int>(it->second.size()) != arg.lbn_size()) {
      return InvalidArgumentError("op '", op.name(), "' (", op.op_type(), "): output '", arg.name(),
                                  "' declares ", arg.lbn_size(), " blobs, inference made ",
                                  it->second.size());
    }
  }
  if (static_cast<int>(outputs.size()) != op.output_size()) {
    return InvalidArgumentError("op '", op.name(), "' (", op.op_type(), "): declares ",
                                op.output_size(), " output args, the op type has ", outputs.size());
  }
  for (const ArgProto& arg : op.output()) {
    for (int i = 0; i < arg.lbn_size(); ++i) {
      if (!descs->emplace(arg.lbn(i), outputs.at(arg.name())[i]).second) {
        return AlreadyExistsError("op '", op.name(), "': blob '", arg.lbn(i),
                                  "' is produced twice");
      }
    }
  }
  return Status::OK();
}

Status ReinferBlobDescs(Job* job) {
  ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder(*job));
  BlobDescMap descs;
  for (int index : order) RETURN_IF_ERROR(InferAndRecord(job->op(index), &descs));
  SetBlobDescs(descs, job);
  return Status::OK();
}

Status FillMutableInputs(Job* job) {
  for (OpConf& op : *job->mutable_op()) {
    ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(op.op_type(), op.name()));
    op.clear_mutable_input();
    for (const std::string& arg : def->mutable_inputs) {
      for (const ArgProto& input : op.input()) {
        if (input.name() == arg) op.add_mutable_input(arg);
      }
    }
  }
  return Status::OK();
}

std::map<std::string, int> ProducerIndex(const Job& job) {
  std::map<std::string, int> producer;
  for (int i = 0; i < job.op_size(); ++i) {
    for (const ArgProto& arg : job.op(i).output()) {
      for (const std::string& lbn : arg.lbn()) producer.emplace(lbn, i);
    }
  }
  return producer;
}

StatusOr<std::vector<int>> TopologicalOrder(const Job& job) {
  std::map<std::string, int> index_of;
  for (int i = 0; i < job.op_size(); ++i) {
    if (!index_of.emplace(job.op(i).name(), i).second) {
      return InvalidArgumentError("job '", job.conf().name(), "': two ops are named '",
                                  job.op(i).name(), "'");
    }
  }
  std::map<std::string, int> producer = ProducerIndex(job);
  std::vector<std::set<int>> successors(job.op_size());
  std::vector<int> pending(job.op_size(), 0);
  auto add_edge = [&](int from, int to) {
    if (successors[from].insert(to).second) ++pending[to];
  };
  for (int i = 0; i < job.op_size(); ++i) {
    const OpConf& op = job.op(i);
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        auto it = producer.find(lbn);
        if (it == producer.end()) {
          return NotFoundError("op '", op.name(), "' (", op.op_type(), "): input '", arg.name(),
                               "' reads blob '", lbn, "', which no op produces");
        }
        add_edge(it->second, i);
      }
    }
    for (const std::string& name : op.control_input()) {
      auto it = index_of.find(name);
      if (it == index_of.end()) {
        return NotFoundError("op '", op.name(), "': control input '", name, "' is not an op");
      }
      add_edge(it->second, i);
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < job.op_size(); ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int next : successors[i]) {
      if (--pending[next] == 0) ready.push(next);
    }
  }
  if (static_cast<int>(order.size()) != job.op_size()) {
    for (int i = 0; i < job.op_size(); ++i) {
      if (pending[i] > 0) {
        return InvalidArgumentError("job '", job.conf().name(), "': op '", job.op(i).name(),
                                    "' is on, or waits for, a dependency cycle");
      }
    }
  }
  return order;
}

std::vector<std::string> ConsumersOf(const Job& job, const std::string& lbn) {
  std::set<std::string> names;
  for (const OpConf& op : job.op()) {
    for (const ArgProto& arg : op.input()) {
      for (const std::string& input : arg.lbn()) {
        if (input == lbn) names.insert(op.name());
      }
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

const OpConf* FindOp(const Job& job, const std::string& name) {
  for (const OpConf& op : job.op()) {
    if (op.name() == name) return &op;
  }
  return nullptr;
}

OpConf* FindMutableOp(Job* job, const std::string& name) {
  for (OpConf& op : *job->mutable_op()) {
    if (op.name() == name) return &op;
  }
  return nullptr;
}

}  // namespace oflite
