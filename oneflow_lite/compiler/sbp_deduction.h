// SBP deduction: choosing, for every op, the SBP signature that moves the
// fewest (weighted) bytes given the layouts its producers chose, and the
// boxing each layout change needs.
//
// Cost model (bytes): a transfer between layouts on one placement costs the
// bytes a ring algorithm moves (P->B all-reduce 2(n-1)T, P->S reduce-scatter
// and S->B all-gather (n-1)T, S(i)->S(j) all-to-all (n-1)T/n, B->S slice and
// B->P nothing) plus 64 bytes of overhead per step, weighted by intra- or
// cross-machine weight; a transfer
// between placements adds the bytes copied from device to device (0 on the
// same device). User hints (OpConf.output_sbp_hint / input_sbp_hint) filter
// the candidates (an empty NdSbp entry leaves that blob free); a hint no
// signature satisfies is an error naming the op.
// Ops are visited in topological order (greedy); ties keep the op's own
// signature order (variables prefer broadcast, other ops try broadcast last).
//
// Hierarchical placements (n-D SBP, nd_sbp.h, docs/compiler.md): every
// layout is an NdSbp with one entry per hierarchy axis. The candidates are
// the product of the op's 1-D signatures per axis: axis k asks the op's SBP
// rule with parallel_num h_k on the descs as split by the axes before it,
// so divisibility and fit are checked per level. Signatures that split one
// tensor axis on two hierarchy axes are refused (with the reason), and so
// are variables and sources split on two axes (their kernels cut a 1-D
// part). A hint has one entry per axis, or one entry meaning that SBP on
// every axis; another length is an InvalidArgument naming the op and both
// lengths. A conversion costs the sum of its per-axis steps (NdBoxingPath),
// each the 1-D cost of every sub-group over the tensor as split by the other
// axes, weighted cross-machine when the sub-group spans machines. Between
// different placements where either is hierarchical, the producer converts
// to all-B, each consumer device copies one whole replica, then cuts
// locally. Flat placements are the 1-axis case and cost exactly as before.
// Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_SBP_DEDUCTION_H_
#define ONEFLOW_LITE_COMPILER_SBP_DEDUCTION_H_

#include <vector>

#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/compiler/logical_graph.h"
#include "oneflow_lite/ops/sbp.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace compiler {

struct CostWeights {
  double intra_machine = 1.0;   // per byte between devices of one machine
  double cross_machine = 10.0;  // per byte between machines
};

// One conversion on a single placement.
struct BoxingStep {
  BoxingKind kind = BOXING_NONE;
  SbpParallel in;
  SbpParallel out;
};

// On one device every layout is the whole tensor: returns B when n == 1.
SbpParallel NormalizeSbp(const SbpParallel& sbp, int64_t parallel_num);
// The steps that turn `from` into `to` on a placement of n devices (empty if
// equal). S->P goes through B (all-gather, then B->P).
std::vector<BoxingStep> BoxingPath(const SbpParallel& from, const SbpParallel& to,
                                   int64_t parallel_num);
// Whether a collective needs data from other parts (false for slice, B->P).
bool BoxingCommunicates(BoxingKind kind);
const char* BoxingKindShortName(BoxingKind kind);  // "all_reduce", ...

// Balanced split (docs/plan_format.md): part i of `dim` over n parts; the
// rule is common/partition.h's BalancedPart, spelled for compiler callers.
int64_t SplitPartSize(int64_t dim, int64_t parallel_num, int64_t parallel_id);
int64_t SplitPartStart(int64_t dim, int64_t parallel_num, int64_t parallel_id);
// The per-device desc of a logical blob.
TensorDesc PhysicalDesc(const TensorDesc& logical, const SbpParallel& sbp,
                        int64_t parallel_num, int64_t parallel_id);
// Whether `sbp` can lay out `logical` on n devices (split axis in range and
// at least one row per device).
bool SbpFits(const TensorDesc& logical, const SbpParallel& sbp, int64_t parallel_num);

// Weighted bytes to turn (producer placement, from) into (consumer placement,
// to); each layout has one entry per hierarchy axis of its placement (one
// for a flat placement).
double TransferCost(const TensorDesc& logical, const PlacementProto& producer,
                    const NdSbp& from, const PlacementProto& consumer, const NdSbp& to,
                    const CostWeights& weights);

// The chosen signature of one op, normalized to its placement: one entry per
// hierarchy axis (a single entry on a flat placement).
struct OpSbp {
  std::vector<NdSbp> inputs;
  std::vector<NdSbp> outputs;
  double cost = 0;  // weighted bytes of the chosen signature's input transfers
};

// Result indexed by node id.
StatusOr<std::vector<OpSbp>> DeduceSbp(const LogicalGraph& graph, const CostWeights& weights);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_SBP_DEDUCTION_H_
