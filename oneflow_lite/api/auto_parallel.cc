#include "oneflow_lite/api/auto_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "oneflow_lite/api/autodiff.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/micro_batches.h"
#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/api/optimizer.h"
#include "oneflow_lite/api/shard_optimizer.h"
#include "oneflow_lite/compiler/nd_sbp.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string OpOfLbn(const std::string& lbn) { return lbn.substr(0, lbn.find('/')); }

NdSbp Nd(std::initializer_list<SbpParallel> sbps) {
  NdSbp nd;
  for (const SbpParallel& s : sbps) *nd.add_sbp() = s;
  return nd;
}

bool IsSource(const OpConf& op) {
  if (op.op_type() == "variable") return false;
  StatusOr<const OpDef*> def = LookupOpDef(op.op_type());
  return def.ok() && (*def)->is_source;
}

int64_t Elements(const TensorDesc& desc) {
  int64_t n = 1;
  for (int64_t d : desc.shape.dims()) n *= d;
  return n;
}

// Ops through which a column split of their input stays a split of their
// output that the row half can consume: elementwise on the split axis, and
// inside attention the heads the channel split becomes (reshape,
// transpose, the scores' and mix's matmuls without weights, the softmax).
bool KeepsColumns(const std::string& op_type) {
  static const std::set<std::string> kOps = {
      "relu",      "gelu",      "gelu_tanh", "tanh",   "sigmoid",        "bias_add",
      "dropout",   "identity",  "scalar_mul", "scalar_add", "fused_bias_add_relu",
      "reshape",   "transpose", "matmul",    "causal_softmax", "softmax"};
  return kOps.count(op_type) > 0;
}

// A matmul whose second input is a trainable 2-D variable.
struct WeightedMatmul {
  int op_index;
  std::string weight;  // variable op name
  int64_t elements;
  bool transpose_b;
};

std::vector<WeightedMatmul> WeightedMatmuls(const Job& forward) {
  std::vector<WeightedMatmul> out;
  BlobDescMap descs = BlobDescsOf(forward);
  for (int i = 0; i < forward.op_size(); ++i) {
    const OpConf& op = forward.op(i);
    if (op.op_type() != "matmul") continue;
    for (const ArgProto& arg : op.input()) {
      if (arg.name() != "b" || arg.lbn_size() != 1) continue;
      const OpConf* producer = FindOp(forward, OpOfLbn(arg.lbn(0)));
      if (producer == nullptr || producer->op_type() != "variable") continue;
      auto d = descs.find(arg.lbn(0));
      if (d == descs.end() || d->second.shape.dims().size() != 2) continue;
      bool tb = false;
      for (const AttrEntry& a : op.attr()) {
        if (a.key() == "transpose_b") tb = a.value().b();
      }
      out.push_back({i, producer->name(), Elements(d->second), tb});
    }
  }
  return out;
}

// The bias variable added to `matmul`'s output by a bias_add, if any.
std::string BiasOf(const Job& forward, const OpConf& matmul) {
  std::string out_lbn = OutputLbn(matmul.name(), "out");
  for (const OpConf& op : forward.op()) {
    if (op.op_type() != "bias_add" && op.op_type() != "fused_bias_add_relu") continue;
    bool reads = false;
    std::string bias;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        if (lbn == out_lbn) reads = true;
        const OpConf* p = FindOp(forward, OpOfLbn(lbn));
        if (p != nullptr && p->op_type() == "variable" && arg.name() != "in") bias = p->name();
      }
    }
    if (reads && !bias.empty()) return bias;
  }
  return "";
}

// Megatron pairs: which weights are column- and which row-split.
std::map<std::string, int> TensorParallelAxes(const Job& forward, int64_t min_elements,
                                              std::map<std::string, std::string>* biases) {
  std::map<std::string, int> axis_of;  // weight -> split axis of the weight
  std::set<std::string> column_split;  // lbns split by columns
  std::vector<WeightedMatmul> matmuls = WeightedMatmuls(forward);
  std::map<int, const WeightedMatmul*> by_index;
  for (const WeightedMatmul& m : matmuls) by_index[m.op_index] = &m;
  for (int i = 0; i < forward.op_size(); ++i) {
    const OpConf& op = forward.op(i);
    bool input_split = false;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        if (column_split.count(lbn) && (op.op_type() != "matmul" || arg.name() == "a")) {
          input_split = true;
        }
      }
    }
    auto m = by_index.find(i);
    if (m != by_index.end() && m->second->elements >= min_elements) {
      // Weight [in, out] (or [out, in] transposed): a column split cuts
      // `out`, a row split cuts `in`.
      int col_axis = m->second->transpose_b ? 0 : 1;
      int row_axis = 1 - col_axis;
      if (input_split) {
        axis_of[m->second->weight] = row_axis;  // output: a partial sum
      } else {
        axis_of[m->second->weight] = col_axis;
        for (const ArgProto& arg : op.output()) {
          for (const std::string& lbn : arg.lbn()) column_split.insert(lbn);
        }
        std::string bias = BiasOf(forward, op);
        if (!bias.empty()) (*biases)[m->second->weight] = bias;
      }
      continue;
    }
    if (input_split && KeepsColumns(op.op_type())) {
      for (const ArgProto& arg : op.output()) {
        for (const std::string& lbn : arg.lbn()) column_split.insert(lbn);
      }
    }
  }
  return axis_of;
}

// The activation hints of Megatron pairs, as a hand-written transformer
// states them (api/transformer.cc): a column-split matmul's output (and its
// bias_add's) split on the last axis, a row-split one's a partial sum whose
// gradient is replicated, the row half's input split on its last axis and
// the column half's input replicated (gradient too: the partial dX of the
// column halves meet in one all-reduce there). `data_axis`: a 2-D layout,
// S(0) on the first axis. Ops with several outputs are hinted only when
// replicated (LayerNorm's statistics); sources and variables not at all.
std::map<std::string, LayoutSpec::OpHints> MegatronActivationHints(
    const Job& forward, const std::map<std::string, int>& axes, bool data_axis) {
  std::map<std::string, LayoutSpec::OpHints> hints;
  const BlobDescMap descs = BlobDescsOf(forward);
  auto nd = [&](const SbpParallel& s) {
    return data_axis ? Nd({SplitSbp(0), s}) : Nd({s});
  };
  auto last_axis = [&](const std::string& lbn) {
    auto d = descs.find(lbn);
    return d == descs.end() ? -1 : static_cast<int>(d->second.shape.dims().size()) - 1;
  };
  // `sbp` on every output of `op_name` (all B, or a single output's split).
  auto hint = [&](const std::string& op_name, const SbpParallel& sbp, const SbpParallel& grad) {
    const OpConf* op = FindOp(forward, op_name);
    if (op == nullptr || op->op_type() == "variable" || IsSource(*op) || hints.count(op_name)) return;
    int outputs = 0;
    for (const ArgProto& arg : op->output()) outputs += arg.lbn_size();
    if (outputs != 1 && !sbp.has_broadcast()) return;
    LayoutSpec::OpHints& h = hints[op_name];
    for (int k = 0; k < outputs; ++k) {
      h.output.push_back(nd(sbp));
      h.output_grad.push_back(nd(grad));
    }
  };
  std::map<std::string, std::vector<const OpConf*>> readers;  // lbn -> ops reading it
  for (const OpConf& op : forward.op()) {
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) readers[lbn].push_back(&op);
    }
  }
  std::set<std::string> row_matmuls;
  for (const WeightedMatmul& m : WeightedMatmuls(forward)) {
    auto axis = axes.find(m.weight);
    if (axis == axes.end()) continue;
    const OpConf& op = forward.op(m.op_index);
    const bool column = axis->second == (m.transpose_b ? 0 : 1);
    if (!column) row_matmuls.insert(op.name());
    std::string a;
    for (const ArgProto& arg : op.input()) {
      if (arg.name() == "a" && arg.lbn_size() == 1) a = arg.lbn(0);
    }
    const std::string out = OutputLbn(op.name(), "out");
    const int rank = last_axis(out);
    if (a.empty() || rank < 1) continue;
    std::vector<std::string> outputs = {op.name()};
    for (const OpConf* r : readers[out]) {
      if (r->op_type() == "bias_add") outputs.push_back(r->name());
    }
    if (column) {
      for (const std::string& o : outputs) hint(o, SplitSbp(rank), SplitSbp(rank));
      hint(OpOfLbn(a), BroadcastSbp(), BroadcastSbp());
    } else {
      for (const std::string& o : outputs) hint(o, PartialSumSbp(), BroadcastSbp());
      const int a_rank = last_axis(a);
      if (a_rank >= 1) hint(OpOfLbn(a), SplitSbp(a_rank), SplitSbp(a_rank));
    }
  }
  // Inside a pair (from a column half's output to the row half's input:
  // attention's heads, an MLP's activation) the deduction places the ops;
  // every other activation is replicated over the group, as in Megatron
  // (the residual stream, embeddings, norms, the loss).
  std::set<std::string> inside;
  std::vector<std::string> frontier;
  for (const auto& [name, h] : hints) {
    if (!h.output.empty() && IsSplit(h.output.back().sbp(h.output.back().sbp_size() - 1))) {
      frontier.push_back(name);
    }
  }
  while (!frontier.empty()) {
    const std::string name = frontier.back();
    frontier.pop_back();
    if (!inside.insert(name).second) continue;
    const OpConf* op = FindOp(forward, name);
    if (op == nullptr) continue;
    for (const ArgProto& arg : op->output()) {
      for (const std::string& lbn : arg.lbn()) {
        for (const OpConf* r : readers[lbn]) {
          if (!row_matmuls.count(r->name())) frontier.push_back(r->name());
        }
      }
    }
  }
  if (hints.empty()) return hints;
  for (const OpConf& op : forward.op()) {
    if (!inside.count(op.name())) hint(op.name(), BroadcastSbp(), BroadcastSbp());
  }
  return hints;
}

// A stage boundary before forward op `cut`, moved back over the ops that
// only the later stage reads and whose inputs the later stage reads anyway
// (or are variables, which go with their first reader): a block's
// LayerNorm before its attention's first matmul joins that block, so that
// only the residual stream crosses, not it and the norm's output. Not
// below `floor` (the previous boundary); sources stay where they are.
// `readers`: lbn -> indices of the forward ops reading it.
int EarlierCut(const Job& forward, const std::map<std::string, std::vector<int>>& readers,
               int cut, int floor) {
  auto read_at = [&](const std::string& lbn) -> const std::vector<int>& {
    static const std::vector<int> kNone;
    auto r = readers.find(lbn);
    return r == readers.end() ? kNone : r->second;
  };
  int best = cut;
  while (cut - 1 > floor) {
    const OpConf& op = forward.op(cut - 1);
    if (IsSource(op)) break;
    if (op.op_type() == "variable") {  // placed by its first reader: neutral
      --cut;
      continue;
    }
    bool later_only = true;  // every reader of its outputs is at or past `cut`
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) {
        for (int r : read_at(lbn)) later_only = later_only && r >= cut;
      }
    }
    bool crossing_anyway = true;  // every input is a variable's or read at or past `cut`
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        const OpConf* producer = FindOp(forward, OpOfLbn(lbn));
        if (producer != nullptr && producer->op_type() == "variable") continue;
        bool later = false;
        for (int r : read_at(lbn)) later = later || r >= cut;
        crossing_anyway = crossing_anyway && later;
      }
    }
    if (!later_only || !crossing_anyway) break;
    best = --cut;
  }
  return best;
}

PlacementProto StagePlacement(const ClusterProto& cluster, int stage, int stages,
                              const std::vector<int64_t>& hierarchy) {
  PlacementProto p;
  const int m = cluster.machine_size();
  const MachineProto& first = cluster.machine(0);
  bool cuda = first.cuda_devices() > 0;
  p.set_device_type(cuda ? DEVICE_CUDA : DEVICE_CPU);
  int per = m / stages;
  for (int i = stage * per; i < (stage + 1) * per; ++i) p.add_machine_id(cluster.machine(i).id());
  int devices = cuda ? first.cuda_devices() : std::max(1, first.cpu_devices());
  for (int d = 0; d < devices; ++d) p.add_device_id(d);
  for (int64_t h : hierarchy) p.mutable_hierarchy()->add_dim(h);
  return p;
}

int64_t DevicesOf(const ClusterProto& cluster) {
  const MachineProto& first = cluster.machine(0);
  int per = first.cuda_devices() > 0 ? first.cuda_devices() : std::max(1, first.cpu_devices());
  return static_cast<int64_t>(cluster.machine_size()) * per;
}

std::string Short(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f ms", us / 1e3);
  return buf;
}

}  // namespace

StatusOr<Job> ForwardJobOf(const Job& trained) {
  if (!trained.conf().is_train()) {
    return FailedPreconditionError("auto-parallel: job '", trained.conf().name(),
                                   "' is not a training job");
  }
  Job forward;
  forward.set_version(trained.version());
  *forward.mutable_conf() = trained.conf();
  forward.mutable_conf()->clear_pipeline();
  std::set<std::string> kept;
  for (const OpConf& op : trained.op()) {
    if (op.has_micro_batch()) {
      return FailedPreconditionError(
          "auto-parallel: job '", trained.conf().name(), "' is already micro-batched (op '",
          op.name(), "'); build it without SetMicroBatches and let the search choose");
    }
    if (op.is_backward() || op.is_optimizer()) continue;
    kept.insert(op.name());
  }
  for (const OpConf& op : trained.op()) {
    if (!kept.count(op.name())) continue;
    OpConf copy = op;
    copy.clear_control_input();
    for (const std::string& c : op.control_input()) {
      if (kept.count(c)) copy.add_control_input(c);
    }
    copy.clear_mutable_input();
    *forward.add_op() = std::move(copy);
  }
  for (const LogicalBlobDesc& blob : trained.blob()) {
    if (kept.count(OpOfLbn(blob.lbn()))) *forward.add_blob() = blob;
  }
  return forward;
}

std::vector<LayoutSpec> CandidateLayouts(const Job& forward, const ClusterProto& cluster,
                                         const AutoParallelOptions& options) {
  std::vector<LayoutSpec> out;
  const int64_t devices = DevicesOf(cluster);
  const int machines = cluster.machine_size();
  const int64_t batch = forward.conf().batch_size();
  LayoutSpec dp;
  dp.name = "dp";
  dp.description = "data parallel over " + std::to_string(devices) + " device(s)";
  dp.has_source_sbp = true;
  *dp.source_sbp.add_sbp() = SplitSbp(0);
  out.push_back(dp);
  if (devices < 2) return out;
  LayoutSpec zero = dp;
  zero.name = "zero";
  zero.description = "data parallel, optimizer states and parameters sharded";
  zero.zero = true;
  out.push_back(zero);

  std::map<std::string, std::string> biases;
  std::map<std::string, int> axes = TensorParallelAxes(forward, options.min_split_elements, &biases);
  LayoutSpec tpa;  // tp-act: also the layout inside pipeline stages below
  if (!axes.empty()) {
    LayoutSpec tp;
    tp.name = "tp";
    tp.description = "tensor parallel (Megatron pairs) over " + std::to_string(devices) +
                     " device(s), the batch whole";
    tp.has_source_sbp = true;
    *tp.source_sbp.add_sbp() = BroadcastSbp();
    for (const auto& [weight, axis] : axes) *tp.variable_sbp[weight].add_sbp() = SplitSbp(axis);
    for (const auto& [weight, bias] : biases) *tp.variable_sbp[bias].add_sbp() = SplitSbp(0);
    out.push_back(tp);
    // The same with the pairs' activations hinted (as a hand-written
    // transformer does): without them the deduction may pick a
    // reduce-scatter and all-gathers, or all-to-alls around attention heads.
    tpa = tp;
    tpa.name = "tp-act";
    tpa.description += ", activations hinted";
    tpa.op_hints = MegatronActivationHints(forward, axes, false);
    if (!tpa.op_hints.empty()) out.push_back(tpa);
    // 2-D: data parallel across groups, tensor parallel inside.
    const std::map<std::string, LayoutSpec::OpHints> nd_hints =
        MegatronActivationHints(forward, axes, true);
    for (int64_t d = 2; d < devices; ++d) {
      if (devices % d != 0 || devices / d < 2) continue;
      int64_t t = devices / d;
      if (batch > 0 && batch % d != 0) continue;
      LayoutSpec h;
      h.name = "dp" + std::to_string(d) + "xtp" + std::to_string(t);
      h.description = "data parallel " + std::to_string(d) + " x tensor parallel " +
                      std::to_string(t) + " on a " + std::to_string(d) + "x" + std::to_string(t) +
                      " hierarchy";
      h.hierarchy = {d, t};
      h.has_source_sbp = true;
      h.source_sbp = Nd({SplitSbp(0), BroadcastSbp()});
      for (const auto& [weight, axis] : axes) h.variable_sbp[weight] = Nd({BroadcastSbp(), SplitSbp(axis)});
      for (const auto& [weight, bias] : biases) h.variable_sbp[bias] = Nd({BroadcastSbp(), SplitSbp(0)});
      out.push_back(h);
      LayoutSpec ha = h;
      ha.name += "-act";
      ha.description += ", activations hinted";
      ha.op_hints = nd_hints;
      if (!ha.op_hints.empty()) out.push_back(ha);
    }
  }
  // Pipelines: cut between weighted matmuls.
  std::vector<WeightedMatmul> matmuls = WeightedMatmuls(forward);
  std::map<std::string, std::vector<int>> readers;  // lbn -> indices of the ops reading it
  for (int i = 0; i < forward.op_size(); ++i) {
    for (const ArgProto& arg : forward.op(i).input()) {
      for (const std::string& lbn : arg.lbn()) readers[lbn].push_back(i);
    }
  }
  for (int stages = 2; stages <= machines && stages <= static_cast<int>(matmuls.size()); ++stages) {
    if (machines % stages != 0) continue;
    // Balanced by weight elements (contiguous groups of matmuls, each
    // closing once it holds its share); for 2 stages also the cuts one
    // matmul before and after the balanced one.
    int64_t total = 0;
    for (const auto& m : matmuls) total += m.elements;
    std::vector<size_t> cut_at;  // index into matmuls where a stage begins
    int64_t acc = 0;
    for (size_t c = 0; c + 1 < matmuls.size() && static_cast<int>(cut_at.size()) < stages - 1; ++c) {
      acc += matmuls[c].elements;
      if (acc * stages >= total * static_cast<int64_t>(cut_at.size() + 1) ||
          matmuls.size() - c - 1 == static_cast<size_t>(stages - 1 - cut_at.size())) {
        cut_at.push_back(c + 1);
      }
    }
    if (static_cast<int>(cut_at.size()) != stages - 1) continue;
    std::vector<std::vector<int>> cut_sets;
    if (stages == 2) {
      for (int delta : {0, -1, 1}) {
        long c = static_cast<long>(cut_at[0]) + delta;
        if (c >= 1 && c < static_cast<long>(matmuls.size())) cut_sets.push_back({matmuls[c].op_index});
      }
    } else {
      std::vector<int> cuts;
      for (size_t c : cut_at) cuts.push_back(matmuls[c].op_index);
      cut_sets.push_back(cuts);
    }
    for (std::vector<int>& cuts : cut_sets) {
      for (size_t k = 0; k < cuts.size(); ++k) {
        cuts[k] = EarlierCut(forward, readers, cuts[k], k == 0 ? 0 : cuts[k - 1]);
      }
    }
    int64_t stage_devices = devices / stages;
    for (const std::vector<int>& cuts : cut_sets) {
      std::string where;
      for (int c : cuts) where += (where.empty() ? "" : ",") + forward.op(c).name();
      for (int64_t m : options.micro_batches) {
        if (m < 2 || batch <= 0 || batch % (m * stage_devices) != 0) continue;
        LayoutSpec pp;
        pp.stages = stages;
        pp.cuts = cuts;
        pp.micro_batches = m;
        pp.name = "pp" + std::to_string(stages) + " m" + std::to_string(m) +
                  (cut_sets.size() > 1 ? " @" + where : "");
        pp.description = std::to_string(stages) + " pipeline stages (cut before " + where +
                         "), " + std::to_string(stage_devices) +
                         " device(s) data parallel per stage, 1F1B over " + std::to_string(m) +
                         " micro-batches";
        pp.has_source_sbp = true;
        *pp.source_sbp.add_sbp() = SplitSbp(0);
        out.push_back(pp);
      }
      // Tensor parallel inside each stage (Megatron pairs with their
      // activations hinted), the micro-batch whole in a stage's group.
      if (axes.empty() || stage_devices < 2) continue;
      for (int64_t m : options.micro_batches) {
        if (m < 2 || batch <= 0 || batch % m != 0) continue;
        LayoutSpec pt = tpa;
        pt.stages = stages;
        pt.cuts = cuts;
        pt.micro_batches = m;
        pt.name = "pp" + std::to_string(stages) + " m" + std::to_string(m) + " x tp" +
                  std::to_string(stage_devices) + (cut_sets.size() > 1 ? " @" + where : "");
        pt.description = std::to_string(stages) + " pipeline stages (cut before " + where +
                         "), tensor parallel (Megatron pairs, activations hinted) over each "
                         "stage's " + std::to_string(stage_devices) + " device(s), 1F1B over " +
                         std::to_string(m) + " micro-batches";
        out.push_back(pt);
      }
    }
  }
  return out;
}

StatusOr<Job> ApplyLayout(const Job& forward, const LayoutSpec& layout,
                          const ClusterProto& cluster, bool ignore_hints) {
  if (cluster.machine_size() == 0) return InvalidArgumentError("auto-parallel: empty cluster");
  if (cluster.machine_size() % layout.stages != 0) {
    return InvalidArgumentError("layout '", layout.name, "': ", layout.stages,
                                " stages do not divide ", cluster.machine_size(), " machines");
  }
  Job job = forward;
  std::vector<PlacementProto> stage_placement;
  for (int s = 0; s < layout.stages; ++s) {
    stage_placement.push_back(StagePlacement(cluster, s, layout.stages, layout.hierarchy));
  }
  *job.mutable_conf()->mutable_default_placement() = stage_placement[0];
  // Stage of each op: the cuts it is at or past (they ascend); a variable
  // goes with its first reader.
  std::vector<int> stage(job.op_size(), 0);
  for (int i = 0; i < job.op_size(); ++i) {
    while (stage[i] < static_cast<int>(layout.cuts.size()) && i >= layout.cuts[stage[i]]) ++stage[i];
  }
  std::map<std::string, int> index_of;
  for (int i = 0; i < job.op_size(); ++i) index_of[job.op(i).name()] = i;
  for (int i = 0; i < job.op_size(); ++i) {
    const OpConf& op = job.op(i);
    if (op.op_type() != "variable") continue;
    std::vector<std::string> readers = ConsumersOf(job, OutputLbn(op.name(), "out"));
    int first = job.op_size();
    for (const std::string& r : readers) first = std::min(first, index_of[r]);
    if (first < job.op_size()) stage[i] = stage[first];
  }
  for (int i = 0; i < job.op_size(); ++i) {
    OpConf* op = job.mutable_op(i);
    if (ignore_hints) {
      op->clear_output_sbp_hint();
      op->clear_input_sbp_hint();
      op->clear_output_grad_sbp_hint();
      op->clear_placement();
    }
    if (IsSource(*op)) stage[i] = 0;
    if (layout.stages > 1 && !op->has_placement()) *op->mutable_placement() = stage_placement[stage[i]];
    if (op->op_type() == "variable" && op->output_sbp_hint_size() == 0) {
      auto it = layout.variable_sbp.find(op->name());
      if (it != layout.variable_sbp.end()) *op->add_output_sbp_hint() = it->second;
    }
    auto hinted = layout.op_hints.find(op->name());
    if (hinted != layout.op_hints.end() && op->output_sbp_hint_size() == 0 &&
        op->output_grad_sbp_hint_size() == 0) {
      for (const NdSbp& h : hinted->second.output) *op->add_output_sbp_hint() = h;
      for (const NdSbp& h : hinted->second.output_grad) *op->add_output_grad_sbp_hint() = h;
    }
    if (IsSource(*op)) {
      // A data source's 1-D hint is the batch layout the data helpers set
      // by default (S(0), or B for a tensor-parallel job): the candidate's
      // to choose, or a tensor-parallel candidate would keep the batch
      // split and the deduction mix it with split weights.
      bool replace = layout.has_source_sbp;
      for (const NdSbp& hint : op->output_sbp_hint()) replace = replace && hint.sbp_size() == 1;
      if (replace) op->clear_output_sbp_hint();
      if (op->output_sbp_hint_size() == 0 && layout.has_source_sbp) {
        int outputs = 0;
        for (const ArgProto& arg : op->output()) outputs += arg.lbn_size();
        for (int k = 0; k < outputs; ++k) *op->add_output_sbp_hint() = layout.source_sbp;
      } else if (!layout.hierarchy.empty()) {
        // A user's 1-D batch hint on a 2-D placement: the batch axis.
        for (NdSbp& hint : *op->mutable_output_sbp_hint()) {
          if (hint.sbp_size() == 1) *hint.add_sbp() = BroadcastSbp();
        }
      }
    }
  }
  RETURN_IF_ERROR(ReinferBlobDescs(&job));
  AutodiffOptions autodiff_options;
  if (layout.micro_batches > 1) {
    ASSIGN_OR_RETURN(MicroBatchedJob unrolled,
                     UnrollMicroBatches(job, layout.micro_batches, PIPELINE_1F1B));
    job = std::move(unrolled.job);
    autodiff_options.loss_parts = std::move(unrolled.loss_parts);
  }
  ASSIGN_OR_RETURN(AutodiffResult autodiff, Autodiff(job, autodiff_options));
  ASSIGN_OR_RETURN(Job trained, AddOptimizerOps(autodiff.job, autodiff.variable_grads));
  if (layout.zero) {
    ASSIGN_OR_RETURN(trained, ShardOptimizerStates(trained));
  }
  return trained;
}

DescentResult CoordinateDescent(const std::vector<int>& start, const std::vector<int>& choices,
                                const std::function<StatusOr<double>(const std::vector<int>&)>& cost,
                                int max_evaluations) {
  DescentResult r;
  r.point = start;
  auto eval = [&](const std::vector<int>& p) {
    ++r.evaluations;
    StatusOr<double> c = cost(p);
    return c.ok() ? *c : kInf;
  };
  r.cost = eval(start);
  bool changed = true;
  while (changed && r.evaluations < max_evaluations) {
    changed = false;
    for (size_t i = 0; i < start.size() && r.evaluations < max_evaluations; ++i) {
      for (int v = 0; v < choices[i] && r.evaluations < max_evaluations; ++v) {
        if (v == r.point[i]) continue;
        std::vector<int> p = r.point;
        p[i] = v;
        double c = eval(p);
        if (c < r.cost) {
          r.cost = c;
          r.point = p;
          changed = true;
        }
      }
    }
  }
  return r;
}

StatusOr<AutoParallelResult> ChooseLayout(const Job& trained, const ClusterProto& cluster,
                                          const Calibration& calibration,
                                          const AutoParallelOptions& options) {
  ASSIGN_OR_RETURN(Job forward, ForwardJobOf(trained));
  if (cluster.machine_size() == 0) return InvalidArgumentError("auto-parallel: empty cluster");
  AutoParallelResult result;
  result.calibration = calibration;
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  struct Evaluated {
    LayoutSpec spec;
    Job job;
    double step_us = kInf;
    int64_t peak = 0;
    std::string error;
  };
  std::vector<Evaluated> evaluated;
  int evaluations = 0;
  cost::SimOptions sim_options = options.sim;
  if (sim_options.iterations <= 0) sim_options.iterations = 12;
  const auto started = std::chrono::steady_clock::now();
  bool out_of_time = false;
  auto budget_left = [&]() {
    if (options.time_budget_seconds <= 0) return true;
    double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (spent > options.time_budget_seconds) out_of_time = true;
    return !out_of_time;
  };
  auto evaluate = [&](const LayoutSpec& spec) -> Evaluated {
    Evaluated e;
    e.spec = spec;
    ++evaluations;
    StatusOr<Job> job = ApplyLayout(forward, spec, cluster, options.ignore_hints);
    if (!job.ok()) {
      e.error = job.status().message();
      return e;
    }
    e.job = *job;
    StatusOr<Plan> plan = compiler::Compile(*job, cluster, options.compile);
    if (!plan.ok()) {
      e.error = plan.status().message();
      return e;
    }
    if (options.verify) {
      Status verified = options.verify(*plan);
      if (!verified.ok()) {
        e.error = "the compiled plan fails verification: " + verified.message();
        return e;
      }
    }
    if (options.measure_missing) {
      Status measured = options.measure_missing(*plan, &result.calibration);
      if (!measured.ok()) {
        e.error = measured.message();
        return e;
      }
    }
    StatusOr<cost::SimResult> sim = cost::SimulatePlan(*plan, result.calibration, sim_options);
    if (!sim.ok()) {
      e.error = sim.status().message();
      return e;
    }
    e.step_us = sim->step_time_us;
    for (const cost::SimMachineStat& m : sim->machines) e.peak = std::max(e.peak, m.memory_bytes);
    return e;
  };
  auto fits = [&](const Evaluated& e) {
    return e.error.empty() && (options.memory_limit_bytes <= 0 || e.peak <= options.memory_limit_bytes);
  };
  for (const LayoutSpec& spec : CandidateLayouts(forward, cluster, options)) {
    if (evaluations >= options.max_evaluations || !budget_left()) break;
    Evaluated e = evaluate(spec);
    log(spec.name + ": " + (e.error.empty() ? Short(e.step_us) : "not possible: " + e.error));
    evaluated.push_back(std::move(e));
  }
  // Coordinate descent over the large variables' SBP, from the fastest
  // flat one-stage layout, then from the fastest 2-D one (there over the
  // variables' SBP on the tensor-parallel axis, the data-parallel axis
  // kept): each seed's own split of every large weight is only the
  // Megatron pairing's guess (a small last layer split by columns, say).
  // The seed's spec and time by value: `evaluated` grows below.
  const BlobDescMap descs = BlobDescsOf(forward);
  auto descend = [&](const LayoutSpec base, const double seed_us) {
    if (DevicesOf(cluster) <= 1 || evaluations >= options.max_evaluations || !budget_left()) return;
    const bool nd = !base.hierarchy.empty();
    std::vector<std::string> vars;
    std::vector<int> start, choices;
    const std::vector<SbpParallel> values = {BroadcastSbp(), SplitSbp(0), SplitSbp(1)};
    for (const OpConf& op : forward.op()) {
      if (op.op_type() != "variable" || (!options.ignore_hints && op.output_sbp_hint_size() > 0)) continue;
      auto d = descs.find(OutputLbn(op.name(), "out"));
      if (d == descs.end() || Elements(d->second) < options.min_split_elements) continue;
      int rank = static_cast<int>(d->second.shape.dims().size());
      vars.push_back(op.name());
      choices.push_back(std::min<int>(3, 1 + rank));
      int current = 0;
      auto h = base.variable_sbp.find(op.name());
      if (h != base.variable_sbp.end() && h->second.sbp_size() == (nd ? 2 : 1)) {
        const SbpParallel& last = h->second.sbp(h->second.sbp_size() - 1);
        if (IsSplit(last)) current = 1 + static_cast<int>(last.split_axis());
      }
      start.push_back(current);
    }
    std::map<std::vector<int>, double> memo;
    auto spec_of = [&](const std::vector<int>& p) {
      LayoutSpec s = base;
      for (size_t i = 0; i < vars.size(); ++i) {
        s.variable_sbp[vars[i]] = nd ? Nd({BroadcastSbp(), values[p[i]]}) : Nd({values[p[i]]});
      }
      std::string name = base.name + "+";
      for (size_t i = 0; i < vars.size(); ++i) {
        name += (i ? "," : "") + std::string(p[i] == 0 ? "B" : p[i] == 1 ? "S0" : "S1");
      }
      s.name = name;
      if (!base.op_hints.empty()) {
        // An activation-hinted seed: the activations hinted for the pairs
        // these splits make, not for the seed's. A weight taken out of a
        // pair (a small last layer made whole, say) otherwise keeps its
        // pairing's hints, and those force the collectives the change meant
        // to drop (a row half's partial sums all-reduced for a replicated
        // layer, where a reduce-scatter to the batch split is half the bytes).
        std::map<std::string, int> split_axes;
        for (const auto& [variable, sbp] : s.variable_sbp) {
          if (sbp.sbp_size() == 0) continue;
          const SbpParallel& last = sbp.sbp(sbp.sbp_size() - 1);
          if (IsSplit(last)) split_axes[variable] = static_cast<int>(last.split_axis());
        }
        s.op_hints = MegatronActivationHints(forward, split_axes, nd);
      }
      s.description = base.description + "; variables " + name.substr(base.name.size() + 1) +
                      (nd ? " on the tensor-parallel axis" : "") + " (" +
                      std::to_string(vars.size()) + " large variables in job order)";
      return s;
    };
    auto cost = [&](const std::vector<int>& p) -> StatusOr<double> {
      if (p == start) return seed_us;
      auto m = memo.find(p);
      if (m != memo.end()) return m->second;
      if (!budget_left()) return DeadlineExceededError("search budget spent");
      Evaluated e = evaluate(spec_of(p));
      double c = fits(e) ? e.step_us : kInf;
      memo[p] = c;
      log(e.spec.name + ": " + (e.error.empty() ? Short(e.step_us) : "not possible: " + e.error));
      evaluated.push_back(std::move(e));
      return c;
    };
    if (!vars.empty()) {
      CoordinateDescent(start, choices, cost, options.max_evaluations - evaluations);
    }
  };
  for (const bool nd : {false, true}) {
    const Evaluated* seed = nullptr;
    for (const Evaluated& e : evaluated) {
      if (e.spec.stages == 1 && e.spec.hierarchy.empty() != nd && !e.spec.zero && fits(e) &&
          (seed == nullptr || e.step_us < seed->step_us)) {
        seed = &e;
      }
    }
    if (seed != nullptr) descend(seed->spec, seed->step_us);
  }
  // The winner.
  const Evaluated* best = nullptr;
  for (const Evaluated& e : evaluated) {
    if (fits(e) && (best == nullptr || e.step_us < best->step_us)) best = &e;
  }
  // A near tie between a pipeline and the best layout without stages goes
  // to the latter (AutoParallelOptions::pipeline_margin).
  std::string margin_note;
  if (best != nullptr && best->spec.stages > 1 && options.pipeline_margin > 0) {
    const Evaluated* flat = nullptr;
    for (const Evaluated& e : evaluated) {
      if (fits(e) && e.spec.stages == 1 && (flat == nullptr || e.step_us < flat->step_us)) flat = &e;
    }
    if (flat != nullptr && flat->step_us <= best->step_us * (1 + options.pipeline_margin)) {
      margin_note = flat->spec.name + " is predicted " + Short(flat->step_us) + ", within " +
                    std::to_string(std::lround(options.pipeline_margin * 100)) +
                    " % of the pipelined " + best->spec.name + " (" + Short(best->step_us) +
                    "): chosen, as the model predicts pipelines less well (pipeline margin)";
      log(margin_note);
      best = flat;
    }
  }
  std::vector<const Evaluated*> order;
  for (const Evaluated& e : evaluated) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Evaluated* a, const Evaluated* b) {
    return a->step_us < b->step_us;
  });
  AutoParallelReport& report = result.report;
  report.set_memory_limit_bytes(options.memory_limit_bytes);
  report.set_transport(options.sim.transport);
  report.set_evaluated(evaluations);
  if (out_of_time) {
    report.set_note("the search's budget of " + std::to_string(static_cast<int>(options.time_budget_seconds)) +
                    " s ran out after " + std::to_string(evaluations) + " plan(s); later candidates were not compared");
    log(report.note());
  }
  for (const Evaluated* e : order) {
    LayoutCandidate* c = report.add_candidate();
    c->set_name(e->spec.name);
    c->set_description(e->spec.description);
    c->set_predicted_step_us(std::isinf(e->step_us) ? 0 : e->step_us);
    c->set_peak_machine_bytes(e->peak);
    c->set_error(e->error);
    c->set_over_memory_limit(e->error.empty() && !fits(*e));
  }
  if (best == nullptr) {
    std::string why;
    for (const Evaluated& e : evaluated) {
      why += "\n  " + e.spec.name + ": " +
             (e.error.empty() ? "needs " + std::to_string(e.peak) + " bytes on a machine" : e.error);
    }
    return FailedPreconditionError("auto-parallel: no layout fits", 
                                   options.memory_limit_bytes > 0
                                       ? " the memory limit of " + std::to_string(options.memory_limit_bytes) + " bytes per machine"
                                       : "",
                                   ":", why);
  }
  if (!margin_note.empty()) {
    report.set_note(report.note().empty() ? margin_note : report.note() + "; " + margin_note);
  }
  report.set_chosen(best->spec.name);
  result.job = best->job;
  ASSIGN_OR_RETURN(result.plan, CompileNodePlan(best->job, cluster, options.compile));
  *result.plan.mutable_auto_parallel() = report;
  return result;
}

}  // namespace oflite
