// Writes real compiled plans and their damaged variants for the CLI test
// (plan_cli_test.sh) and the plan fuzzer's seed corpus:
//   write_mutated_plans DIR
// DIR/<base>.plan.pb for every compiled test plan (testing/test_plans.h),
// DIR/bad/<mutation>.plan.pb for every mutation (testing/plan_mutations.h),
// and DIR/bad/manifest.tsv: one line per mutation, its name, then the
// substrings the verifier's message must contain, tab-separated.
#include <cstdio>
#include <string>

#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/plan/testing/plan_mutations.h"
#include "oneflow_lite/plan/testing/test_plans.h"

namespace {

int Die(const oflite::Status& status) {
  std::fprintf(stderr, "write_mutated_plans: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_mutated_plans DIR (DIR/bad must exist)\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto plans = oflite::testing::CompiledTestPlans();
  if (!plans.ok()) return Die(plans.status());
  for (const auto& plan : *plans) {
    oflite::Status saved = oflite::SavePlan(dir + "/" + plan.name + ".plan.pb", plan.plan);
    if (!saved.ok()) return Die(saved);
  }
  std::FILE* manifest = std::fopen((dir + "/bad/manifest.tsv").c_str(), "w");
  if (manifest == nullptr) return Die(oflite::InvalidArgumentError("cannot write ", dir, "/bad"));
  for (const oflite::testing::PlanMutation& mutation : oflite::testing::PlanMutations()) {
    auto base = oflite::testing::CompiledTestPlan(mutation.base);
    if (!base.ok()) return Die(base.status());
    oflite::Plan plan = std::move(base).value();
    const std::vector<std::string> needles = mutation.apply(&plan);
    if (needles.empty()) return Die(oflite::InternalError(mutation.name, ": nothing to damage"));
    oflite::Status saved = oflite::SavePlan(dir + "/bad/" + mutation.name + ".plan.pb", plan);
    if (!saved.ok()) return Die(saved);
    std::fprintf(manifest, "%s", mutation.name.c_str());
    for (const std::string& needle : needles) std::fprintf(manifest, "\t%s", needle.c_str());
    std::fprintf(manifest, "\n");
  }
  return std::fclose(manifest) == 0 ? 0 : 1;
}
