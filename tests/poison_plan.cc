// Fault injection for whole-system tests: writes a copy of a Plan in which
// one machine's optimizer updates diverge, so `oflite run --check-nan` fails
// there (a local failure of one rank) while the other machines run the
// unchanged plan.
//
//   poison_plan IN.plan.pb OUT.plan.pb MACHINE [FROM_ITERATION]
//
// Without FROM_ITERATION (or with 0) the machine's updates use learning rate
// 1e30 from the first iteration, so its weights overflow after its first
// update. With FROM_ITERATION K > 0 the updates keep their learning rate for
// iterations 0..K-1 (the machine trains in step with the others) and switch
// to a "step" schedule whose factor 1e30 applies from iteration K on: the
// update of iteration K overflows the weights and the NaN check fails in
// iteration K + 1's forward, so a test can require that the other ranks
// have trained (and logged) before it.
//
// Exit 0 when at least one update was changed, 1 otherwise (with a reason).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/proto_io.h"

namespace {

bool IsUpdate(const oflite::OpConf& op) {
  for (const oflite::AttrEntry& attr : op.attr()) {
    if (attr.key() == "base_lr") return true;
  }
  return false;
}

int Poison(const std::string& in, const std::string& out, int64_t machine,
           int64_t from_iteration) {
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
        oflite::OpConf* op = kernel.mutable_op();
        if (!IsUpdate(*op)) continue;
        if (from_iteration == 0) {
          oflite::SetFloatAttr(op, "base_lr", 1e30);
        } else {
          oflite::SetStringAttr(op, "lr_type", "step");
          oflite::SetIntAttr(op, "step_size", from_iteration);
          oflite::SetFloatAttr(op, "gamma", 1e30);
          oflite::SetIntAttr(op, "warmup_iters", 0);
        }
        ++changed;
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
  std::printf("poison_plan: %d updates of machine %lld diverge from iteration %lld\n", changed,
              static_cast<long long>(machine), static_cast<long long>(from_iteration));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: poison_plan IN.plan.pb OUT.plan.pb MACHINE [FROM_ITERATION]\n");
    return 2;
  }
  char* end = nullptr;
  long long from = argc == 5 ? std::strtoll(argv[4], &end, 10) : 0;
  if (argc == 5 && (*end != '\0' || from < 0)) {
    std::fprintf(stderr, "poison_plan: FROM_ITERATION must be an integer >= 0, got '%s'\n",
                 argv[4]);
    return 2;
  }
  return Poison(argv[1], argv[2], std::strtoll(argv[3], nullptr, 10), from);
}
