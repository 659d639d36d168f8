#include "oneflow_lite/compiler/sbp_deduction.h"

#include <algorithm>
#include <set>
#include <string>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/compiler/nd_sbp.h"
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

// A signature with one NdSbp per input and output (1 entry when flat).
struct NdSignature {
  std::vector<NdSbp> inputs;
  std::vector<NdSbp> outputs;

  // The flat form for 1 axis ("S(0), B -> S(0)"), "(S(0), B), ... -> ..." else.
  std::string ToString() const {
    std::string s;
    for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + NdSbpToString(inputs[i]);
    s += " -> ";
    for (size_t i = 0; i < outputs.size(); ++i) s += (i ? ", " : "") + NdSbpToString(outputs[i]);
    return s;
  }
};

// A hint as one NdSbp of the placement's rank: flat placements accept any
// number of equal entries; hierarchical ones one entry (every axis) or one
// per axis.
StatusOr<NdSbp> ExpandHint(const NdSbp& hint, const OpConf& op, const std::string& what,
                           const PlacementProto& placement) {
  if (hint.sbp_size() == 0) {
    return InvalidArgumentError("op '", op.name(), "': empty SBP hint for ", what);
  }
  const Hierarchy hierarchy = PlacementHierarchy(placement);
  const size_t rank = hierarchy.size();
  if (rank == 1) {
    // On one device every layout is the whole tensor, whatever the hint.
    if (ParallelNum(placement) == 1) return ToNdSbp(BroadcastSbp());
    for (const SbpParallel& s : hint.sbp()) {
      if (!SbpEqual(s, hint.sbp(0))) {
        return InvalidArgumentError(
            "op '", op.name(), "': SBP hint ", NdSbpToString(hint), " for ", what, " has ",
            hint.sbp_size(), " entries, but placement '", PlacementToString(placement),
            "' is flat (1 axis): give one SBP, or a hierarchy such as '",
            PlacementToString(placement), "@", ParallelNum(placement) / 2, "x2'");
      }
    }
    return ToNdSbp(hint.sbp(0));
  }
  if (hint.sbp_size() == 1) return UniformNdSbp(hint.sbp(0), rank);
  if (hint.sbp_size() != static_cast<int>(rank)) {
    return InvalidArgumentError("op '", op.name(), "': SBP hint ", NdSbpToString(hint), " for ",
                                what, " has ", hint.sbp_size(), " entries, but placement '",
                                PlacementToString(placement), "' has ", rank,
                                " hierarchy axes (", HierarchyToString(hierarchy),
                                "): give one SBP per axis, e.g. ",
                                NdSbpToString(AllBroadcastNdSbp(rank)));
  }
  return hint;
}

int SplitAxisCount(const NdSbp& sbp) {
  int count = 0;
  for (const SbpParallel& s : sbp.sbp()) count += IsSplit(s) ? 1 : 0;
  return count;
}

class OpSbpChooser {
 public:
  OpSbpChooser(const LogicalGraph& graph, const std::vector<OpSbp>& chosen,
               const CostWeights& weights, const LogicalNode& node)
      : graph_(graph), chosen_(chosen), weights_(weights), node_(node),
        n_(ParallelNum(node.placement())), hierarchy_(PlacementHierarchy(node.placement())) {}

  StatusOr<OpSbp> Choose() {
    ASSIGN_OR_RETURN(std::vector<NdSignature> candidates, Candidates());
    RETURN_IF_ERROR(ReadHints());
    const NdSignature* best = nullptr;
    double best_cost = 0;
    std::string rejected;
    for (const NdSignature& sig : candidates) {
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

  // The op's 1-D signatures on `parallel_num` devices for these descs, in
  // preference order (variables: all-B first; others: all-B last).
  StatusOr<std::vector<SbpSignature>> AxisSignatures(const std::vector<TensorDesc>& in_descs,
                                                     const std::vector<TensorDesc>& out_descs,
                                                     int64_t parallel_num) {
    const int num_in = static_cast<int>(node_.inputs.size());
    const int num_out = static_cast<int>(node_.outputs.size());
    SbpSignature all_b = AllBroadcastSignature(num_in, num_out);
    std::vector<SbpSignature> offered;
    if (parallel_num > 1 && node_.def->sbp) {
      SbpContext ctx(node_.op, in_descs, out_descs, parallel_num);
      Status s = node_.def->sbp(&ctx);
      if (!s.ok()) return s.WithContext("op '" + node_.op.name() + "' SBP signatures");
      offered = ctx.signatures();
      for (const std::string& reason : ctx.withheld()) {
        if (std::find(withheld_.begin(), withheld_.end(), reason) == withheld_.end()) {
          withheld_.push_back(reason);
        }
      }
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
    for (SbpSignature& sig : result) {
      for (SbpParallel& s : sig.inputs) s = NormalizeSbp(s, parallel_num);
      for (SbpParallel& s : sig.outputs) s = NormalizeSbp(s, parallel_num);
    }
    return result;
  }

  // A candidate under construction: the axes so far and the descs as split
  // by them (the smallest part, so later axes check fit conservatively).
  struct Partial {
    NdSignature sig;
    std::vector<TensorDesc> in_descs;
    std::vector<TensorDesc> out_descs;
  };

  static void Extend(const std::vector<SbpParallel>& axis_sbp, int64_t parallel_num,
                     std::vector<NdSbp>* nd, std::vector<TensorDesc>* descs) {
    for (size_t i = 0; i < axis_sbp.size(); ++i) {
      *(*nd)[i].add_sbp() = axis_sbp[i];
      (*descs)[i] = PhysicalDesc((*descs)[i], axis_sbp[i], parallel_num, parallel_num - 1);
    }
  }

  StatusOr<std::vector<NdSignature>> Candidates() {
    std::vector<Partial> partials(1);
    partials[0].in_descs = Descs(node_.inputs);
    partials[0].out_descs = Descs(node_.outputs);
    partials[0].sig.inputs.resize(node_.inputs.size());
    partials[0].sig.outputs.resize(node_.outputs.size());
    for (size_t k = 0; k < hierarchy_.size(); ++k) {
      std::vector<Partial> next;
      for (const Partial& p : partials) {
        ASSIGN_OR_RETURN(std::vector<SbpSignature> axis,
                         AxisSignatures(p.in_descs, p.out_descs, hierarchy_[k]));
        for (const SbpSignature& sig : axis) {
          Partial q = p;
          Extend(sig.inputs, hierarchy_[k], &q.sig.inputs, &q.in_descs);
          Extend(sig.outputs, hierarchy_[k], &q.sig.outputs, &q.out_descs);
          next.push_back(std::move(q));
        }
      }
      partials = std::move(next);
    }
    // Drop duplicates, keeping the first occurrence.
    std::vector<NdSignature> unique;
    std::set<std::string> seen;
    for (Partial& p : partials) {
      if (seen.insert(p.sig.ToString()).second) unique.push_back(std::move(p.sig));
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
    // An empty entry leaves its blob to the cost model.
    auto read = [&](const NdSbp& hint, const std::string& what,
                    std::vector<NdSbp>* hints) -> Status {
      if (hint.sbp_size() == 0) {
        hints->emplace_back();
        return Status::OK();
      }
      ASSIGN_OR_RETURN(NdSbp s, ExpandHint(hint, op, what, node_.placement()));
      hints->push_back(NormalizeNdSbp(s, hierarchy_));
      return Status::OK();
    };
    for (int i = 0; i < op.output_sbp_hint_size(); ++i) {
      RETURN_IF_ERROR(read(op.output_sbp_hint(i), "output '" + node_.outputs[i].lbn + "'",
                           &output_hints_));
    }
    for (int i = 0; i < op.input_sbp_hint_size(); ++i) {
      RETURN_IF_ERROR(read(op.input_sbp_hint(i), "input '" + node_.inputs[i].arg + "'",
                           &input_hints_));
    }
    return Status::OK();
  }

  // Empty when `sbp` can lay out `desc` on this placement; else why not,
  // naming `what` ("output 'x'").
  std::string Misfit(const std::string& what, const TensorDesc& desc, const NdSbp& sbp) const {
    if (hierarchy_.size() == 1) {
      if (SbpFits(desc, sbp.sbp(0), n_)) return "";
      return what + " cannot be laid out as " + SbpToString(sbp.sbp(0)) + " on " +
             std::to_string(n_) + " devices";
    }
    std::string why = NdSbpMisfit(desc, sbp, hierarchy_);
    if (why.empty() && (node_.is_variable || node_.is_source) && SplitAxisCount(sbp) > 1) {
      why = "a variable or source is split on one hierarchy axis at most (its kernel cuts a "
            "1-D part)";
    }
    return why.empty() ? "" : what + " cannot be laid out as " + NdSbpToString(sbp) + ": " + why;
  }

  // Empty when the signature is usable; otherwise why not.
  std::string Reject(const NdSignature& sig) const {
    for (size_t i = 0; i < output_hints_.size(); ++i) {
      if (output_hints_[i].sbp_size() > 0 && !NdSbpEqual(output_hints_[i], sig.outputs[i])) {
        return "output '" + node_.outputs[i].lbn + "' is hinted " + NdSbpToString(output_hints_[i]);
      }
    }
    for (size_t i = 0; i < input_hints_.size(); ++i) {
      if (input_hints_[i].sbp_size() > 0 && !NdSbpEqual(input_hints_[i], sig.inputs[i])) {
        return "input '" + node_.inputs[i].SlotName() + "' is hinted " +
               NdSbpToString(input_hints_[i]);
      }
    }
    for (size_t i = 0; i < node_.outputs.size(); ++i) {
      std::string why = Misfit("output '" + node_.outputs[i].lbn + "'",
                               graph_.blob(node_.outputs[i].lbn).desc, sig.outputs[i]);
      if (!why.empty()) return why;
    }
    for (size_t i = 0; i < node_.inputs.size(); ++i) {
      const ArgSlot& in = node_.inputs[i];
      const BlobInfo& blob = graph_.blob(in.lbn);
      std::string why = Misfit("input '" + in.SlotName() + "'", blob.desc, sig.inputs[i]);
      if (!why.empty()) return why;
      if (!node_.IsMutableInput(in.arg)) continue;
      const LogicalNode& producer = graph_.node(blob.producer);
      const NdSbp& have = chosen_[blob.producer].outputs[blob.producer_slot];
      if (!PlacementEqual(producer.placement(), node_.placement()) ||
          !NdSbpEqual(have, sig.inputs[i])) {
        return "in-place input '" + in.SlotName() + "' (blob '" + in.lbn + "', " +
               NdSbpToString(have) + " on '" + PlacementToString(producer.placement()) +
               "') must keep its producer's placement and SBP";
      }
    }
    return "";
  }

  double Cost(const NdSignature& sig) const {
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
  const Hierarchy hierarchy_;
  std::vector<std::string> withheld_;  // reasons from the op's SBP rule
  std::vector<NdSbp> output_hints_;
  std::vector<NdSbp> input_hints_;
};

// Weighted bytes of an n-D conversion on one hierarchical placement: every
// step on every sub-group of its axis.
double NdBoxingCost(const TensorDesc& logical, const PlacementProto& placement, const NdSbp& from,
                    const NdSbp& to, const CostWeights& w) {
  const Hierarchy hierarchy = PlacementHierarchy(placement);
  const std::vector<DeviceRef> devices = PlacementDevices(placement);
  double cost = 0;
  for (const NdBoxingStep& step : NdBoxingPath(from, to, hierarchy)) {
    const int64_t n = hierarchy[step.axis];
    for (const std::vector<int64_t>& group : SubGroups(hierarchy, step.axis)) {
      bool spans = false;
      for (int64_t id : group) spans = spans || devices[id].machine != devices[group[0]].machine;
      const TensorDesc sub = SubGroupLogicalDesc(logical, step.before, hierarchy, step.axis, group[0]);
      cost += (StepBytes(step.step.kind, static_cast<double>(sub.ByteSize()), n) +
               kBoxingStepBytes) *
              (spans ? w.cross_machine : w.intra_machine);
    }
  }
  return cost;
}

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
                    const NdSbp& from_nd, const PlacementProto& consumer, const NdSbp& to_nd,
                    const CostWeights& w) {
  const int64_t np = ParallelNum(producer);
  const int64_t nc = ParallelNum(consumer);
  if (IsHierarchical(producer) || IsHierarchical(consumer)) {
    if (PlacementEqual(producer, consumer)) return NdBoxingCost(logical, producer, from_nd, to_nd, w);
    // All-B on the producer, one whole replica copied to each consumer
    // device, then local cuts (free).
    double cost = IsHierarchical(producer)
                      ? NdBoxingCost(logical, producer, from_nd,
                                     AllBroadcastNdSbp(PlacementHierarchy(producer).size()), w)
                      : BoxingCost(logical, producer, from_nd.sbp(0), BroadcastSbp(), w);
    std::vector<DeviceRef> src = PlacementDevices(producer);
    std::vector<DeviceRef> dst = PlacementDevices(consumer);
    for (int64_t j = 0; j < nc; ++j) {
      cost += static_cast<double>(logical.ByteSize()) * LinkWeight(src[j % np], dst[j], w);
    }
    return cost;
  }
  const SbpParallel& from = from_nd.sbp(0);
  const SbpParallel& to = to_nd.sbp(0);
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
