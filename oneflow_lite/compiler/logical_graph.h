// The logical graph of a Job: ops with resolved definitions and placements,
// blobs with inferred descs, data and control edges, a deterministic
// topological order.
//
// Build() validates the Job against the op registry and the cluster: unknown
// op types, duplicate names, dangling blobs (an input no op produces), cycles,
// placements outside the cluster and shape mismatches are errors naming the
// op (and blob, machine, device). The graph owns copies of the OpConfs; it is
// immutable after Build() and safe to read from several threads.
#ifndef ONEFLOW_LITE_COMPILER_LOGICAL_GRAPH_H_
#define ONEFLOW_LITE_COMPILER_LOGICAL_GRAPH_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/ops/op_def.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace oflite {
namespace compiler {

// One flattened argument slot of an op: arg name, index within the arg, lbn.
struct ArgSlot {
  std::string arg;
  int index = 0;
  std::string lbn;
  std::string SlotName() const { return arg + "_" + std::to_string(index); }
};

struct LogicalNode {
  int id = 0;  // index in Job.op
  OpConf op;   // placement filled in (the job default if unset)
  const OpDef* def = nullptr;
  std::vector<ArgSlot> inputs;   // flattened in OpConf order
  std::vector<ArgSlot> outputs;  // flattened in OpConf order
  std::vector<int> control_inputs;  // node ids, ascending
  bool is_variable = false;         // op_type "variable"
  bool is_source = false;           // a data source (OpDef::is_source, not a variable)

  const PlacementProto& placement() const { return op.placement(); }
  bool IsMutableInput(const std::string& arg) const;
};

struct BlobInfo {
  TensorDesc desc;
  int producer = 0;        // node id
  int producer_slot = 0;   // index into the producer's outputs
  // (node id, input slot) in ascending order.
  std::vector<std::pair<int, int>> consumers;
};

class LogicalGraph {
 public:
  static StatusOr<LogicalGraph> Build(const Job& job, const ClusterProto& cluster);

  const std::vector<LogicalNode>& nodes() const { return nodes_; }
  const LogicalNode& node(int id) const { return nodes_.at(id); }
  // Node ids in a deterministic topological order (ties: Job order).
  const std::vector<int>& topo_order() const { return topo_order_; }
  const std::map<std::string, BlobInfo>& blobs() const { return blobs_; }
  // CHECK-fails on an unknown lbn (programmer bug: lbns come from the graph).
  const BlobInfo& blob(const std::string& lbn) const;
  bool HasBlob(const std::string& lbn) const { return blobs_.count(lbn) > 0; }
  // The node id of an op name, or -1.
  int FindNode(const std::string& op_name) const;

 private:
  Status AddNodes(const Job& job, const ClusterProto& cluster);
  Status LinkEdges();
  Status SortTopologically();
  Status InferShapes(const Job& job);
  std::string DescribeCycle(const std::vector<int>& in_degree) const;

  std::vector<LogicalNode> nodes_;
  std::map<std::string, int> node_by_name_;
  std::map<std::string, BlobInfo> blobs_;
  std::vector<int> topo_order_;
};

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_LOGICAL_GRAPH_H_
