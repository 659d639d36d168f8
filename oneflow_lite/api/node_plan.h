// CompileNodePlan: everything a node needs, in one Plan (docs/plan_format.md).
//
// Compiles `job` for `cluster` (compiler::Compile with `options`: the
// training plan with its run settings, variable descs and collective
// algorithms) and, for a training job, its evaluation plan: MakeEvalJob
// (eval_job.h: the forward graph on the test split, one pass) compiled for
// the same cluster with default options (but the training options'
// merge_gpu_compute), stored in Plan.eval_plan with
// eval_state EVAL_COMPILED. A job that reads no dataset with a test split
// gets EVAL_NO_TEST_SPLIT; when deriving or compiling the evaluation fails,
// the training plan is still returned, with EVAL_UNAVAILABLE and the error
// in eval_note (`oflite run` reports it after training unless --eval=false,
// as it did when it compiled the evaluation itself). Errors of the training
// compile are returned as compiler::Compile returns them.
// `oflite compile` and the example programs call this; `oflite run` never
// compiles. Deterministic (equal inputs, equal plans); thread-safe.
#ifndef ONEFLOW_LITE_API_NODE_PLAN_H_
#define ONEFLOW_LITE_API_NODE_PLAN_H_

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/compiler/compiler.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"
#include "proto/plan.pb.h"

namespace oflite {

StatusOr<Plan> CompileNodePlan(const Job& job, const ClusterProto& cluster,
                               const compiler::CompileOptions& options = {});

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_NODE_PLAN_H_
