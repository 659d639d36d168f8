// Fault injection for whole-system tests: writes a copy of a Plan in which
// one machine's optimizer updates use learning rate 1e30, so that machine's
// weights overflow after its first update and `oflite run --check-nan` fails
// there (a local failure of one rank) while the other machines run the
// unchanged plan.
//
//   poison_plan IN.plan.pb OUT.plan.pb MACHINE
//
// Exit 0 when at least one update was changed, 1 otherwise (with a reason).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "oneflow_lite/common/proto_io.h"

namespace {

int Poison(const std::string& in, const std::string& out, int64_t machine) {
  oflite::StatusOr<oflite::Plan> plan = oflite::LoadPlan(in);
  if (!plan.ok()) {
    std::fprintf(stderr, "poison_plan: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  int changed = 0;
  for (oflite::MachinePlan& part : *plan->mutable_machine()) {
    if (part.machine_id() != machine) continue;
    for (oflite::TaskProto& task : *part.mutable_task()) {
      for (oflite::KernelConf& kernel : *task.mutable_kernel()) {
        for (oflite::AttrEntry& attr : *kernel.mutable_op()->mutable_attr()) {
          if (attr.key() != "base_lr") continue;
          attr.mutable_value()->set_f(1e30);
          ++changed;
        }
      }
    }
  }
  if (changed == 0) {
    std::fprintf(stderr, "poison_plan: machine %lld of %s has no optimizer update (base_lr)\n",
                 static_cast<long long>(machine), in.c_str());
    return 1;
  }
  oflite::Status saved = oflite::SavePlan(out, *plan);
  if (!saved.ok()) {
    std::fprintf(stderr, "poison_plan: %s\n", saved.ToString().c_str());
    return 1;
  }
  std::printf("poison_plan: %d updates of machine %lld use learning rate 1e30\n", changed,
              static_cast<long long>(machine));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: poison_plan IN.plan.pb OUT.plan.pb MACHINE\n");
    return 2;
  }
  return Poison(argv[1], argv[2], std::strtoll(argv[3], nullptr, 10));
}
