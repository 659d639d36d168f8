#include "oneflow_lite/compiler/sbp_deduction.h"

#include <algorithm>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/compiler/placement.h"

namespace oflite {
namespace compiler {
namespace {

// Every boxing step also costs a fixed overhead (an extra task and a
// synchronization), so between equal byte counts fewer steps win.
constexpr double kBoxingStepBytes = 64;

double StepBytes(BoxingKind kind, double bytes, int64_t n) {
  switch (kind) {
    case BOXING_ALL_REDUCE: return 2.0 * (n - 1) * bytes;
    case BOXING_REDUCE_SCATTER:
    case BOXING_ALL_GATHER: return (n - 1) * bytes;
    case BOXING_ALL_TO_ALL: return (n - 1) * bytes / n;
    default: return 0;
  }
}

double LinkWeight(const DeviceRef& a, const DeviceRef& b, const CostWeights& w) {
  if (a == b) return 0;
  return a.machine == b.machine ? w.intra_machine : w.cross_machine;
}

double BoxingCost(const TensorDesc& logical, const PlacementProto& placement,
                  const SbpParallel& from, const SbpParallel& to, const CostWeights& w) {
  const int64_t n = ParallelNum(placement);
  const double weight = IsSingleMachine(placement) ? w.intra_machine : w.cross_machine;
  double cost = 0;
  for (const BoxingStep& step : BoxingPath(from, to, n)) {
    cost += (StepBytes(step.kind, static_cast<double>(logical.ByteSize()), n) + kBoxingStepBytes) *
            weight;
  }
  return cost;
}

// A hint as one SbpParallel: every hierarchy level must agree.
StatusOr<SbpParallel> FlatHint(const NdSbp& hint, const OpConf& op, const std::string& what) {
  if (hint.sbp_size() == 0) {
    return InvalidArgumentError("op '", op.name(), "': empty SBP hint for ", what);
  }
  for (const SbpParallel& s : hint.sbp()) {
    if (!SbpEqual(s, hint.sbp(0))) {
      return UnimplementedError("op '", op.name(), "': SBP hint for ", what,
                                " differs between hierarchy levels; only flat SBP is supported");
    }
  }
  return hint.sbp(0);
}

class OpSbpChooser {
 public:
  OpSbpChooser(const LogicalGraph& graph, const std::vector<OpSbp>& chosen,
               const CostWeights& weights, const LogicalNode& node)
      : graph_(graph), chosen_(chosen), weights_(weights), node_(node),
        n_(ParallelNum(node.placement())) {}

  StatusOr<OpSbp> Choose() {
    ASSIGN_OR_RETURN(std::vector<SbpSignature> candidates, Candidates());
    RETURN_IF_ERROR(ReadHints());
    const SbpSignature* best = nullptr;
    double best_cost = 0;
    std::string rejected;
    for (const SbpSignature& sig : candidates) {
      std::string why = Reject(sig);
      if (!why.empty()) {
        rejected += "\n  " + sig.ToString() + ": " + why;
        continue;
      }
      double cost = Cost(sig);
      if (best == nullptr || cost < best_cost) {
        best = &sig;
        best_cost = cost;
      }
    }
    if (best == nullptr) {
      return InvalidArgumentError("op '", node_.op.name(), "' (", node_.op.op_type(),
                                  "): impossible SBP request on placement '",
                                  PlacementToString(node_.placement()),
                                  "': no signature is valid;", rejected, WithheldNotes());
    }
    return OpSbp{best->inputs, best->outputs, best_cost};
  }

 private:
  std::vector<TensorDesc> Descs(const std::vector<ArgSlot>& slots) const {
    std::vector<TensorDesc> descs;
    for (const ArgSlot& s : slots) descs.push_back(graph_.blob(s.lbn).desc);
    return descs;
  }

  // "\n  not offered: <reason>" for each signature the op's SBP rule withheld.
  std::string WithheldNotes() const {
    std::string notes;
    for (const std::string& reason : withheld_) notes += "\n  not offered: " + reason;
    return notes;
  }

  void Normalize(SbpSignature* sig) const {
    for (SbpParallel& s : sig->inputs) s = NormalizeSbp(s, n_);
    for (SbpParallel& s : sig->outputs) s = NormalizeSbp(s, n_);
  }

  StatusOr<std::vector<SbpSignature>> Candidates() {
    const int num_in = static_cast<int>(node_.inputs.size());
    const int num_out = static_cast<int>(node_.outputs.size());
    SbpSignature all_b = AllBroadcastSignature(num_in, num_out);
    std::vector<SbpSignature> offered;
    if (n_ > 1 && node_.def->sbp) {
      std::vector<TensorDesc> in_descs = Descs(node_.inputs);
      std::vector<TensorDesc> out_descs = Descs(node_.outputs);
      SbpContext ctx(node_.op, in_descs, out_descs, n_);
      Status s = node_.def->sbp(&ctx);
      if (!s.ok()) return s.WithContext("op '" + node_.op.name() + "' SBP signatures");
      offered = ctx.signatures();
      withheld_ = ctx.withheld();
    }
    std::vector<SbpSignature> result;
    if (node_.is_variable) result.push_back(all_b);
    for (SbpSignature& sig : offered) {
      if (static_cast<int>(sig.inputs.size()) != num_in ||
          static_cast<int>(sig.outputs.size()) != num_out) {
        return InternalError("op '", node_.op.name(), "' (", node_.op.op_type(),
                             "): its SBP function returned '", sig.ToString(), "' for ", num_in,
                             " inputs and ", num_out, " outputs");
      }
      result.push_back(sig);
    }
    if (!node_.is_variable) result.push_back(all_b);
    for (SbpSignature& sig : result) Normalize(&sig);
    // Drop duplicates, keeping the first occurrence.
    std::vector<SbpSignature> unique;
    for (const SbpSignature& sig : result) {
      bool seen = std::any_of(unique.begin(), unique.end(), [&](const SbpSignature& u) {
        return u.ToString() == sig.ToString();
      });
      if (!seen) unique.push_back(sig);
    }
    return unique;
  }

  Status ReadHints() {
    const OpConf& op = node_.op;
    if (op.output_sbp_hint_size() != 0 &&
        op.output_sbp_hint_size() != static_cast<int>(node_.outputs.size())) {
      return InvalidArgumentError("op '", op.name(), "': ", op.output_sbp_hint_size(),
                                  " output SBP hints for ", node_.outputs.size(), " outputs");
    }
    if (op.input_sbp_hint_size() != 0 &&
        op.input_sbp_hint_size() != static_cast<int>(node_.inputs.size())) {
      return InvalidArgumentError("op '", op.name(), "': ", op.input_sbp_hint_size(),
                                  " input SBP hints for ", node_.inputs.size(), " inputs");
    }
    for (int i = 0; i < op.output_sbp_hint_size(); ++i) {
      ASSIGN_OR_RETURN(SbpParallel s,
                       FlatHint(op.output_sbp_hint(i), op, "output '" + node_.outputs[i].lbn + "'"));
      output_hints_.push_back(NormalizeSbp(s, n_));
    }
    for (int i = 0; i < op.input_sbp_hint_size(); ++i) {
      ASSIGN_OR_RETURN(SbpParallel s,
                       FlatHint(op.input_sbp_hint(i), op, "input '" + node_.inputs[i].arg + "'"));
      input_hints_.push_back(NormalizeSbp(s, n_));
    }
    return Status::OK();
  }

  // Empty when the signature is usable; otherwise why not.
  std::string Reject(const SbpSignature& sig) const {
    for (size_t i = 0; i < output_hints_.size(); ++i) {
      if (!SbpEqual(output_hints_[i], sig.outputs[i])) {
        return "output '" + node_.outputs[i].lbn + "' is hinted " + SbpToString(output_hints_[i]);
      }
    }
    for (size_t i = 0; i < input_hints_.size(); ++i) {
      if (!SbpEqual(input_hints_[i], sig.inputs[i])) {
        return "input '" + node_.inputs[i].SlotName() + "' is hinted " +
               SbpToString(input_hints_[i]);
      }
    }
    for (size_t i = 0; i < node_.outputs.size(); ++i) {
      if (!SbpFits(graph_.blob(node_.outputs[i].lbn).desc, sig.outputs[i], n_)) {
        return "output '" + node_.outputs[i].lbn + "' cannot be laid out as " +
               SbpToString(sig.outputs[i]) + " on " + std::to_string(n_) + " devices";
      }
    }
    for (size_t i = 0; i < node_.inputs.size(); ++i) {
      const ArgSlot& in = node_.inputs[i];
      const BlobInfo& blob = graph_.blob(in.lbn);
      if (!SbpFits(blob.desc, sig.inputs[i], n_)) {
        return "input '" + in.SlotName() + "' cannot be laid out as " +
               SbpToString(sig.inputs[i]) + " on " + std::to_string(n_) + " devices";
      }
      if (!node_.IsMutableInput(in.arg)) continue;
      const LogicalNode& producer = graph_.node(blob.producer);
      const SbpParallel& have = chosen_[blob.producer].outputs[blob.producer_slot];
      if (!PlacementEqual(producer.placement(), node_.placement()) ||
          !SbpEqual(have, sig.inputs[i])) {
        return "in-place input '" + in.SlotName() + "' (blob '" + in.lbn + "', " +
               SbpToString(have) + " on '" + PlacementToString(producer.placement()) +
               "') must keep its producer's placement and SBP";
      }
    }
    return "";
  }

  double Cost(const SbpSignature& sig) const {
    double cost = 0;
    for (size_t i = 0; i < node_.inputs.size(); ++i) {
      const BlobInfo& blob = graph_.blob(node_.inputs[i].lbn);
      const LogicalNode& producer = graph_.node(blob.producer);
      cost += TransferCost(blob.desc, producer.placement(),
                           chosen_[blob.producer].outputs[blob.producer_slot], node_.placement(),
                           sig.inputs[i], weights_);
    }
    return cost;
  }

  const LogicalGraph& graph_;
  const std::vector<OpSbp>& chosen_;
  const CostWeights& weights_;
  const LogicalNode& node_;
  const int64_t n_;
  std::vector<std::string> withheld_;  // reasons from the op's SBP rule
  std::vector<SbpParallel> output_hints_;
  std::vector<SbpParallel> input_hints_;
};

}  // namespace

SbpParallel NormalizeSbp(const SbpParallel& sbp, int64_t parallel_num) {
  if (parallel_num <= 1 || sbp.parallel_type_case() == SbpParallel::PARALLEL_TYPE_NOT_SET) {
    return BroadcastSbp();
  }
  return sbp;
}

std::vector<BoxingStep> BoxingPath(const SbpParallel& from_raw, const SbpParallel& to_raw,
                                   int64_t n) {
  SbpParallel from = NormalizeSbp(from_raw, n);
  SbpParallel to = NormalizeSbp(to_raw, n);
  if (SbpEqual(from, to)) return {};
  if (IsPartialSum(from)) {
    return {{IsBroadcast(to) ? BOXING_ALL_REDUCE : BOXING_REDUCE_SCATTER, from, to}};
  }
  if (IsSplit(from)) {
    if (IsBroadcast(to)) return {{BOXING_ALL_GATHER, from, to}};
    if (IsSplit(to)) return {{BOXING_ALL_TO_ALL, from, to}};
    return {{BOXING_ALL_GATHER, from, BroadcastSbp()}, {BOXING_B_TO_P, BroadcastSbp(), to}};
  }
  // from is B.
  if (IsSplit(to)) return {{BOXING_SLICE, from, to}};
  return {{BOXING_B_TO_P, from, to}};
}

bool BoxingCommunicates(BoxingKind kind) {
  return kind == BOXING_ALL_REDUCE || kind == BOXING_REDUCE_SCATTER ||
         kind == BOXING_ALL_GATHER || kind == BOXING_ALL_TO_ALL;
}

const char* BoxingKindShortName(BoxingKind kind) {
  switch (kind) {
    case BOXING_ALL_REDUCE: return "all_reduce";
    case BOXING_REDUCE_SCATTER: return "reduce_scatter";
    case BOXING_ALL_GATHER: return "all_gather";
    case BOXING_SLICE: return "slice";
    case BOXING_ALL_TO_ALL: return "all_to_all";
    case BOXING_B_TO_P: return "b_to_p";
    case BOXING_COPY: return "copy";
    default: return "none";
  }
}

int64_t SplitPartSize(int64_t dim, int64_t n, int64_t i) { return BalancedPart(dim, n, i).size; }

int64_t SplitPartStart(int64_t dim, int64_t n, int64_t i) { return BalancedPart(dim, n, i).begin; }

TensorDesc PhysicalDesc(const TensorDesc& logical, const SbpParallel& sbp, int64_t n,
                        int64_t i) {
  TensorDesc desc = logical;
  SbpParallel s = NormalizeSbp(sbp, n);
  if (IsSplit(s)) {
    desc.shape = BalancedPartShape(logical.shape, s.split_axis(), n, i);
  }
  return desc;
}

bool SbpFits(const TensorDesc& logical, const SbpParallel& sbp, int64_t n) {
  SbpParallel s = NormalizeSbp(sbp, n);
  if (!IsSplit(s)) return true;
  return s.split_axis() >= 0 && s.split_axis() < logical.shape.rank() &&
         logical.shape.dim(s.split_axis()) >= n;
}

double TransferCost(const TensorDesc& logical, const PlacementProto& producer,
                    const SbpParallel& from, const PlacementProto& consumer,
                    const SbpParallel& to, const CostWeights& w) {
  const int64_t np = ParallelNum(producer);
  const int64_t nc = ParallelNum(consumer);
  if (PlacementEqual(producer, consumer)) return BoxingCost(logical, producer, from, to, w);
  // Convert on the producer (to the target layout, or to B when the device
  // counts differ), copy part by part, then slice/mask on the consumer.
  SbpParallel mid = np == nc ? NormalizeSbp(to, nc) : BroadcastSbp();
  double cost = BoxingCost(logical, producer, from, mid, w);
  std::vector<DeviceRef> src = PlacementDevices(producer);
  std::vector<DeviceRef> dst = PlacementDevices(consumer);
  for (int64_t j = 0; j < nc; ++j) {
    TensorDesc part = PhysicalDesc(logical, mid, nc, j);
    cost += static_cast<double>(part.ByteSize()) * LinkWeight(src[j % np], dst[j], w);
  }
  return cost;
}

StatusOr<std::vector<OpSbp>> DeduceSbp(const LogicalGraph& graph, const CostWeights& weights) {
  std::vector<OpSbp> chosen(graph.nodes().size());
  for (int id : graph.topo_order()) {
    OpSbpChooser chooser(graph, chosen, weights, graph.node(id));
    ASSIGN_OR_RETURN(chosen[id], chooser.Choose());
  }
  return chosen;
}

}  // namespace compiler
}  // namespace oflite
