// Test tool: writes a copy of a Plan whose cross-machine registers use the
// bounce-buffer strategy (CM_BOUNCE_BUFFER, what the compiler chooses for a
// dynamic-shape register) instead of static zero-copy, so whole-system tests
// can run the dynamic-register path of CommNetRoute with real processes
// while no op of the project yields dynamic shapes yet.
//
//   bounce_plan IN.plan.pb OUT.plan.pb
//
// Prints how many register descs (producer side and commnet copies) were
// switched; exit 1 when there were none (the plan has no cross-machine
// register) or on an I/O error, 2 on bad usage.
#include <cstdio>
#include <string>

#include "oneflow_lite/common/proto_io.h"

namespace {

int SwitchToBounce(oflite::RegstDescProto* desc) {
  if (desc->cross_machine_strategy() != oflite::CM_STATIC_ZERO_COPY) return 0;
  desc->set_cross_machine_strategy(oflite::CM_BOUNCE_BUFFER);
  return 1;
}

int Rewrite(const std::string& in, const std::string& out) {
  oflite::StatusOr<oflite::Plan> plan = oflite::LoadPlan(in);
  if (!plan.ok()) {
    std::fprintf(stderr, "bounce_plan: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  int changed = 0;
  for (oflite::MachinePlan& machine : *plan->mutable_machine()) {
    for (oflite::TaskProto& task : *machine.mutable_task()) {
      for (oflite::RegstDescProto& desc : *task.mutable_produced()) changed += SwitchToBounce(&desc);
      if (task.type() == oflite::TASK_COMMNET) {
        changed += SwitchToBounce(task.mutable_commnet()->mutable_src_regst());
      }
    }
  }
  if (changed == 0) {
    std::fprintf(stderr, "bounce_plan: %s has no static cross-machine register\n", in.c_str());
    return 1;
  }
  oflite::Status saved = oflite::SavePlan(out, *plan);
  if (!saved.ok()) {
    std::fprintf(stderr, "bounce_plan: %s\n", saved.ToString().c_str());
    return 1;
  }
  std::printf("bounce_plan: %d register descs switched to bounce buffers\n", changed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bounce_plan IN.plan.pb OUT.plan.pb\n");
    return 2;
  }
  return Rewrite(argv[1], argv[2]);
}
