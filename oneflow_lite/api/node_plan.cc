#include "oneflow_lite/api/node_plan.h"

#include "oneflow_lite/api/eval_job.h"

namespace oflite {

StatusOr<Plan> CompileNodePlan(const Job& job, const ClusterProto& cluster,
                               const compiler::CompileOptions& options) {
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, cluster, options));
  if (!job.conf().is_train()) return plan;
  StatusOr<Job> eval_job = MakeEvalJob(job);
  if (!eval_job.ok()) {
    plan.set_eval_state(EVAL_UNAVAILABLE);
    plan.set_eval_note(eval_job.status().message());
    return plan;
  }
  if (eval_job->conf().total_iters() == 0) {
    plan.set_eval_state(EVAL_NO_TEST_SPLIT);
    return plan;
  }
  // Default options, except that the GPU compute merge follows the
  // training plan's (`oflite compile --graph-replay=false` means both).
  compiler::CompileOptions eval_options;
  eval_options.merge_gpu_compute = options.merge_gpu_compute;
  StatusOr<Plan> eval_plan = compiler::Compile(*eval_job, cluster, eval_options);
  if (!eval_plan.ok()) {
    plan.set_eval_state(EVAL_UNAVAILABLE);
    plan.set_eval_note(eval_plan.status().WithContext("compiling the eval job").message());
    return plan;
  }
  *plan.mutable_eval_plan() = std::move(*eval_plan);
  plan.set_eval_state(EVAL_COMPILED);
  return plan;
}

}  // namespace oflite
