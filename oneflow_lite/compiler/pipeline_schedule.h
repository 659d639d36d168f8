// Pipeline schedules for micro-batched jobs: which forward and backward
// units each pipeline stage runs, in which order, enforced with control
// edges.
//
// A micro-batched Job (JobConf.pipeline, made by Graph::SetMicroBatches,
// api/micro_batches.h) tags the ops of micro-batch k with
// OpConf.micro_batch = k: the forward clones and the backward ops autodiff
// made from them. A *stage* is a distinct placement of the tagged forward
// ops, numbered in topological order of the job (the first placement a
// forward op reaches is stage 0). A *unit* is (stage, micro-batch, forward
// or backward): every tagged op of that placement, micro-batch and
// direction. SchedulePipeline orders each stage's units by the job's
// schedule:
//   - GPipe (fill-drain): F0 .. F(M-1), then B0 .. B(M-1);
//   - 1F1B (PipeDream-Flush, as Megatron-LM): stage s of S first runs
//     min(S - s - 1, M) warm-up forwards, then alternates one forward and
//     one backward, then drains the remaining backwards.
// and makes every op of a unit wait for every op of the stage's previous
// unit: each op of the next unit that has no producer inside it gets a
// control input from each op of the previous unit that has no consumer
// inside it. Untagged ops (sources, variables, gradient sums, updates, the
// mean of the micro-batch losses) are not ordered beyond their data edges.
//
// Why the control edges cannot deadlock with register limits: every
// micro-batch has its own ops and therefore its own registers, so no two
// units compete for one register inside an iteration; the added edges and
// the data edges together must form a DAG (checked here: an order that would
// make a unit wait for itself, e.g. 1F1B over placements that are not a
// chain, is refused naming the schedule), and a DAG of actors that act once
// per iteration, with at least one copy of every register, always makes
// progress (the memory planner's own control registers follow the same
// order: they only join registers whose users already precede the later
// producer).
//
// Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_PIPELINE_SCHEDULE_H_
#define ONEFLOW_LITE_COMPILER_PIPELINE_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace compiler {

// The forward (F k) or backward (B k) ops of micro-batch k on one stage.
struct ScheduleUnit {
  int64_t micro_batch = 0;
  bool backward = false;

  bool operator==(const ScheduleUnit& other) const {
    return micro_batch == other.micro_batch && backward == other.backward;
  }
  std::string ToString() const;  // "F3", "B0"
};

// The order stage `stage` (0-based) of `stages` runs its 2 x
// `micro_batches` units in. Requires 0 <= stage < stages, micro_batches >= 1
// and a schedule that is not UNSET (programmer errors: CHECK).
std::vector<ScheduleUnit> StageOrder(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                     int64_t micro_batches);

// (stages - 1) / (micro_batches + stages - 1): the idle share of every stage
// of an ideal pipeline (equal stages, no transfer time), for both schedules.
double BubbleFraction(int64_t stages, int64_t micro_batches);

// "gpipe", "1f1b" ("unset" for UNSET).
std::string PipelineScheduleName(PipelineSchedule schedule);
// Parses "gpipe" or "1f1b" (case-insensitive); InvalidArgument naming the
// text and the choices otherwise.
StatusOr<PipelineSchedule> ParsePipelineSchedule(const std::string& text);

// Adds the schedule's control inputs to `job` (which must have
// JobConf.pipeline) and returns the facts Plan.pipeline records. Errors:
// InvalidArgument for micro_batches < 2, an UNSET schedule, a micro_batch tag
// outside [0, micro_batches), a backward unit on a placement no forward op of
// a micro-batch uses; FailedPrecondition when the order would make a unit
// wait for itself.
StatusOr<PipelinePlan> SchedulePipeline(Job* job);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_PIPELINE_SCHEDULE_H_
