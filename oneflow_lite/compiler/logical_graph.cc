#include "oneflow_lite/compiler/logical_graph.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>

#include "oneflow_lite/compiler/placement.h"

namespace oflite {
namespace compiler {
namespace {

Status OpError(const OpConf& op, const std::string& message) {
  return InvalidArgumentError("op '", op.name(), "' (", op.op_type(), "): ", message);
}

}  // namespace

bool LogicalNode::IsMutableInput(const std::string& arg) const {
  return std::find(def->mutable_inputs.begin(), def->mutable_inputs.end(), arg) !=
         def->mutable_inputs.end();
}

const BlobInfo& LogicalGraph::blob(const std::string& lbn) const {
  auto it = blobs_.find(lbn);
  CHECK(it != blobs_.end()) << "unknown blob " << lbn;
  return it->second;
}

int LogicalGraph::FindNode(const std::string& op_name) const {
  auto it = node_by_name_.find(op_name);
  return it == node_by_name_.end() ? -1 : it->second;
}

StatusOr<LogicalGraph> LogicalGraph::Build(const Job& job, const ClusterProto& cluster) {
  LogicalGraph graph;
  RETURN_IF_ERROR(ValidateCluster(cluster));
  if (job.op_size() == 0) return InvalidArgumentError("job '", job.conf().name(), "' has no op");
  RETURN_IF_ERROR(graph.AddNodes(job, cluster));
  RETURN_IF_ERROR(graph.LinkEdges());
  RETURN_IF_ERROR(graph.SortTopologically());
  RETURN_IF_ERROR(graph.InferShapes(job));
  return graph;
}

Status LogicalGraph::AddNodes(const Job& job, const ClusterProto& cluster) {
  PlacementProto fallback;
  fallback.set_device_type(DEVICE_CPU);
  fallback.add_machine_id(0);
  fallback.add_device_id(0);
  const PlacementProto& job_default =
      job.conf().has_default_placement() ? job.conf().default_placement() : fallback;
  for (int i = 0; i < job.op_size(); ++i) {
    LogicalNode node;
    node.id = i;
    node.op = job.op(i);
    if (node.op.name().empty()) {
      return InvalidArgumentError("job op #", i, " (", node.op.op_type(), ") has no name");
    }
    if (!node_by_name_.emplace(node.op.name(), i).second) {
      return OpError(node.op, "the name is used by two ops");
    }
    ASSIGN_OR_RETURN(node.def, LookupOpDef(node.op.op_type(), node.op.name()));
    if (!node.op.has_placement()) *node.op.mutable_placement() = job_default;
    Status placement_status = ValidatePlacement(node.op.placement(), cluster);
    if (!placement_status.ok()) return OpError(node.op, placement_status.message());
    node.is_variable = node.op.op_type() == "variable";
    node.is_source = node.def->is_source && !node.is_variable;
    for (const ArgProto& arg : node.op.input()) {
      for (int k = 0; k < arg.lbn_size(); ++k) node.inputs.push_back({arg.name(), k, arg.lbn(k)});
    }
    for (const ArgProto& arg : node.op.output()) {
      for (int k = 0; k < arg.lbn_size(); ++k) node.outputs.push_back({arg.name(), k, arg.lbn(k)});
    }
    nodes_.push_back(std::move(node));
  }
  return Status::OK();
}

Status LogicalGraph::LinkEdges() {
  for (LogicalNode& node : nodes_) {
    for (int slot = 0; slot < static_cast<int>(node.outputs.size()); ++slot) {
      const std::string& lbn = node.outputs[slot].lbn;
      if (blobs_.count(lbn)) {
        return OpError(node.op, "output blob '" + lbn + "' is also produced by op '" +
                                    nodes_[blobs_[lbn].producer].op.name() + "'");
      }
      BlobInfo& info = blobs_[lbn];
      info.producer = node.id;
      info.producer_slot = slot;
    }
  }
  for (LogicalNode& node : nodes_) {
    for (int slot = 0; slot < static_cast<int>(node.inputs.size()); ++slot) {
      const ArgSlot& in = node.inputs[slot];
      auto it = blobs_.find(in.lbn);
      if (it == blobs_.end()) {
        return OpError(node.op, "input '" + in.arg + "' reads blob '" + in.lbn +
                                    "' which no op produces (dangling blob)");
      }
      it->second.consumers.emplace_back(node.id, slot);
    }
    std::set<int> controls;
    for (const std::string& name : node.op.control_input()) {
      auto it = node_by_name_.find(name);
      if (it == node_by_name_.end()) {
        return OpError(node.op, "control input '" + name + "' is not an op of the job");
      }
      if (it->second == node.id) return OpError(node.op, "control input on itself");
      controls.insert(it->second);
    }
    node.control_inputs.assign(controls.begin(), controls.end());
  }
  for (auto& [lbn, info] : blobs_) std::sort(info.consumers.begin(), info.consumers.end());
  return Status::OK();
}

Status LogicalGraph::SortTopologically() {
  const int n = static_cast<int>(nodes_.size());
  std::vector<std::vector<int>> successors(n);
  std::vector<int> in_degree(n, 0);
  for (const LogicalNode& node : nodes_) {
    std::set<int> preds(node.control_inputs.begin(), node.control_inputs.end());
    for (const ArgSlot& in : node.inputs) preds.insert(blobs_.at(in.lbn).producer);
    for (int p : preds) {
      successors[p].push_back(node.id);
      ++in_degree[node.id];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (in_degree[i] == 0) ready.push(i);
  }
  while (!ready.empty()) {
    int id = ready.top();
    ready.pop();
    topo_order_.push_back(id);
    for (int s : successors[id]) {
      if (--in_degree[s] == 0) ready.push(s);
    }
  }
  if (static_cast<int>(topo_order_.size()) != n) {
    return InvalidArgumentError("cyclic job: ", DescribeCycle(in_degree));
  }
  return Status::OK();
}

// Walks predecessors among the ops left unsorted until one repeats.
std::string LogicalGraph::DescribeCycle(const std::vector<int>& in_degree) const {
  int start = -1;
  for (int i = 0; i < static_cast<int>(nodes_.size()) && start < 0; ++i) {
    if (in_degree[i] > 0) start = i;
  }
  auto unsorted_pred = [&](int id) {
    const LogicalNode& node = nodes_[id];
    for (const ArgSlot& in : node.inputs) {
      int p = blobs_.at(in.lbn).producer;
      if (in_degree[p] > 0) return p;
    }
    for (int p : node.control_inputs) {
      if (in_degree[p] > 0) return p;
    }
    return -1;
  };
  std::vector<int> path;
  std::vector<int> seen_at(nodes_.size(), -1);
  int cur = start;
  while (cur >= 0 && seen_at[cur] < 0) {
    seen_at[cur] = static_cast<int>(path.size());
    path.push_back(cur);
    cur = unsorted_pred(cur);
  }
  if (cur < 0) return "op '" + nodes_[start].op.name() + "' is on a cycle";
  // path[seen_at[cur]..] walks backwards along the cycle; print it forwards.
  std::vector<int> cycle(path.begin() + seen_at[cur], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::string out;
  for (int id : cycle) out += "op '" + nodes_[id].op.name() + "' -> ";
  return out + "op '" + nodes_[cycle.front()].op.name() + "'";
}

Status LogicalGraph::InferShapes(const Job& job) {
  for (int id : topo_order_) {
    const LogicalNode& node = nodes_[id];
    ArgDescs inputs;
    for (const ArgSlot& in : node.inputs) inputs[in.arg].push_back(blobs_.at(in.lbn).desc);
    ASSIGN_OR_RETURN(ArgDescs outputs, InferOp(node.op, inputs));
    for (const ArgSlot& out : node.outputs) {
      auto it = outputs.find(out.arg);
      if (it == outputs.end() || out.index >= static_cast<int>(it->second.size())) {
        return OpError(node.op, "output '" + out.SlotName() + "' (blob '" + out.lbn +
                                    "') is not produced by the op's definition");
      }
      blobs_[out.lbn].desc = it->second[out.index];
    }
  }
  for (const LogicalBlobDesc& given : job.blob()) {
    auto it = blobs_.find(given.lbn());
    if (it == blobs_.end()) {
      return InvalidArgumentError("job blob list names '", given.lbn(), "' which no op produces");
    }
    TensorDesc expected(given.desc());
    if (expected != it->second.desc) {
      const LogicalNode& producer = nodes_[it->second.producer];
      return OpError(producer.op, "shape mismatch for blob '" + given.lbn() + "': the job says " +
                                      expected.ToString() + " but inference gives " +
                                      it->second.desc.ToString());
    }
  }
  return Status::OK();
}

}  // namespace compiler
}  // namespace oflite
