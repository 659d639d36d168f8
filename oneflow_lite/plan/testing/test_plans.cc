#include "oneflow_lite/plan/testing/test_plans.h"

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace testing {
namespace {

struct Case {
  std::string name;
  compiler::MlpSpec spec;
  ClusterProto cluster;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  compiler::MlpSpec mlp;
  mlp.accuracy_metric = true;
  cases.push_back({"mlp", mlp, compiler::MakeCluster(1, 1)});
  compiler::MlpSpec data_parallel;
  data_parallel.placement = "0:cpu:0-1";
  cases.push_back({"data_parallel", data_parallel, compiler::MakeCluster(1, 2)});
  compiler::MlpSpec pipeline;
  pipeline.stages = {"0:cpu:0", "0:cpu:1"};
  cases.push_back({"pipeline", pipeline, compiler::MakeCluster(1, 2)});
  compiler::MlpSpec columns;
  columns.placement = "0:cpu:0-1";
  columns.model_parallel = compiler::ModelParallel::kSplitColumns;
  cases.push_back({"model_parallel", columns, compiler::MakeCluster(1, 2)});
  compiler::MlpSpec two_machines;
  two_machines.placement = "0-1:cpu:0";
  cases.push_back({"two_machines", two_machines, compiler::MakeCluster(2, 1)});
  compiler::MlpSpec machine_pipeline;
  machine_pipeline.stages = {"0:cpu:0", "1:cpu:0"};
  cases.push_back({"machine_pipeline", machine_pipeline, compiler::MakeCluster(2, 1)});
  compiler::MlpSpec cuda;
  cuda.placement = "0:cuda:0-1";
  cases.push_back({"cuda", cuda, compiler::MakeCluster(1, 1, 2)});
  compiler::MlpSpec merged;
  merged.placement = "0:cuda:0";
  merged.optimizer = compiler::MlpOptimizer::kMomentum;
  cases.push_back({"cuda_one_gpu", merged, compiler::MakeCluster(1, 1, 1)});
  return cases;
}

}  // namespace

StatusOr<std::vector<NamedPlan>> CompiledTestPlans() {
  std::vector<NamedPlan> plans;
  for (const Case& c : Cases()) {
    StatusOr<Job> job = compiler::BuildMlpJob(c.spec);
    if (!job.ok()) return job.status().WithContext("test plan " + c.name);
    StatusOr<Plan> plan = compiler::Compile(*job, c.cluster);
    if (!plan.ok()) return plan.status().WithContext("test plan " + c.name);
    plans.push_back({c.name, std::move(plan).value()});
  }
  return plans;
}

StatusOr<Plan> CompiledMergedGpuPlan() { return CompiledTestPlan("cuda_one_gpu"); }

StatusOr<Plan> CompiledTestPlan(const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<NamedPlan> plans, CompiledTestPlans());
  for (NamedPlan& plan : plans) {
    if (plan.name == name) return std::move(plan.plan);
  }
  return NotFoundError("no test plan '", name, "'");
}

}  // namespace testing
}  // namespace oflite
