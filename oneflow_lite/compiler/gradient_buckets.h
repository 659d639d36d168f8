// Gradient buckets: fuses small partial-sum all-reduces of one iteration
// into one collective (docs/compiler.md, "Gradient buckets";
// docs/plan_format.md, "Collectives").
//
// Data-parallel training makes one P -> B all-reduce per gradient; the
// biases and other small tensors each pay a whole collective latency. This
// pass, run on the task graph between BuildTaskGraph and PlanMemory, groups
// such rings into buckets and rewrites each bucket into ONE ring of fused
// collective tasks: rank j's task consumes every member's part j, produces
// every member's output register (unchanged: same blobs, regst_num and
// consumers) and records the members in TaskNode.bucket; its BoxingConf
// describes the packed 1-D tensor (lbn "bucketB", logical_desc
// dtype[total elements]), so the collective choice (collective_choice.h)
// picks the exchange or the ring for the bucket's total size.
//
// A ring may join a bucket when it is a P -> B all-reduce (BOXING_ALL_REDUCE),
// or, on a flat ring, a P -> S(a) reduce-scatter or an S(a) -> B all-gather
// of a variable's register (ZeRO's gradients and parameters; activations'
// and losses' gathers stay apart: the bucket's all-reduce carries the whole
// member, which costs bytes but not a collective's fixed cost, so it pays
// for the small tensors a bucket takes; CollectiveMember.in_sbp/out_sbp),
// whose tasks are on distinct machines (every machine of the cluster, or a
// group of them: one axis of a hierarchical placement, a pipeline stage's
// data-parallel ranks; what the ring algorithms run over), a static tensor
// of an addable dtype with elements, and
// at most `max_bytes` bytes. A bucket holds rings on the same devices with
// the same dtype, taken greedily in backward order (the longest path from a
// source to the producers of their parts, so members become ready close
// together and fusing costs little overlap), while the bucket's bytes stay
// within `max_bytes` and no member depends on another (through any task,
// ring or bucket: fusing dependent rings would deadlock). A ring joins the
// most recently opened of up to two open buckets it fits, else opens one; a
// full bucket closes, so a gradient at the bound (the GPT's 64 KiB weights)
// does not cut off the small ones around it (their biases). A bucket of one
// ring is left alone. With max_bytes 0 the graph is not touched.
//
// Deterministic: equal graphs give equal buckets. Single-threaded.
#ifndef ONEFLOW_LITE_COMPILER_GRADIENT_BUCKETS_H_
#define ONEFLOW_LITE_COMPILER_GRADIENT_BUCKETS_H_

#include <cstdint>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/compiler/task_graph.h"

namespace oflite {
namespace compiler {

struct BucketStats {
  int buckets = 0;  // fused rings made
  int members = 0;  // all-reduces fused into them
};

// Rewrites `graph` in place (tasks of fused-away rings are removed, task
// indices renumbered; register ids are kept). `machine_count`: machines of
// the cluster. A graph whose order cannot be derived (a cycle) is left as
// it is. Returns what was fused; no error today (a Status for the future).
StatusOr<BucketStats> FuseAllReduceBuckets(TaskGraph* graph, int64_t max_bytes,
                                           int64_t machine_count);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_GRADIENT_BUCKETS_H_
