#include "oneflow_lite/compiler/plan_summary_text.h"

#include <cstddef>
#include <map>
#include <set>
#include <tuple>

#include "oneflow_lite/common/placement_text.h"
#include "oneflow_lite/compiler/pipeline_schedule.h"
#include "oneflow_lite/compiler/plan_summary.h"

namespace oflite {
namespace compiler {

std::pair<int, int> EdgeSyncCounts(const Plan& plan) {
  int stream = 0, event = 0;
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      for (const RegstDescProto& r : t.produced()) {
        for (int k = 0; k < r.consumer_task_id_size(); ++k) {
          const bool ordered =
              k < r.consumer_sync_size() && r.consumer_sync(k) == EDGE_STREAM_ORDER;
          ++(ordered ? stream : event);
        }
      }
    }
  }
  return {stream, event};
}

std::vector<const TaskProto*> ReplayedTasks(const Plan& plan) {
  std::vector<const TaskProto*> tasks;
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.graph_replay()) tasks.push_back(&t);
    }
  }
  return tasks;
}

std::string Address(const Plan& plan, int64_t machine) {
  for (const MachineProto& m : plan.cluster().machine()) {
    if (m.id() == machine) return m.address().empty() ? "-" : m.address();
  }
  return "-";
}

namespace {

constexpr size_t kListLimit = 12;  // rows of long lists in the summary

std::string Join(const std::set<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "-" : out;
}

// The evaluation plan a training plan carries (Plan.eval_state).
std::string EvalText(const Plan& plan) {
  switch (plan.eval_state()) {
    case EVAL_COMPILED: {
      int actors = 0;
      for (const MachinePlan& m : plan.eval_plan().machine()) actors += m.task_size();
      return std::to_string(actors) + " actor(s), " +
             std::to_string(plan.eval_plan().total_iters()) + " iteration(s)";
    }
    case EVAL_NO_TEST_SPLIT:
      return "none (the job reads no test split)";
    case EVAL_UNAVAILABLE:
      return "unavailable (" + plan.eval_note() + ")";
    default:
      return "none";
  }
}

// The compiled algorithm of a conversion lowered to collective tasks, else
// "local".
std::string AlgorithmText(const BoxingConversion& b) {
  if (!b.spans_machines) return "local";
  std::string text = CollectiveAlgorithmName(b.algorithm);
  if (b.buffer_bytes > 0) text += " " + HumanBytes(b.buffer_bytes);
  return text;
}

// The second line of an n-D boxing step: "    all_reduce axis 0 of 2x2
// groups {0,2} {1,3}: (S(0), P) -> (S(0), B)".
std::string NdStepText(const BoxingConversion& b) {
  std::string groups;
  for (const std::string& g : b.groups) groups += " " + g;
  std::string text = "    " + BoxingKindName(b.kind) + " axis " + std::to_string(b.axis) +
                     " of " + b.hierarchy + (b.groups.size() == 1 ? " group" : " groups") + groups;
  // A fused bucket's members have layouts of their own.
  if (b.members.empty()) text += ": " + b.nd_in_sbp + " -> " + b.nd_out_sbp;
  return text + "\n";
}

// Tensors on hierarchical placements with their n-D SBP.
void PrintNdTensors(std::FILE* out, const PlanSummary& s) {
  if (s.nd_tensors.empty()) return;
  std::fprintf(out, "\nn-D SBP (%zu tensor(s) on hierarchical placements):\n", s.nd_tensors.size());
  for (size_t i = 0; i < s.nd_tensors.size() && i < kListLimit; ++i) {
    const NdTensorLayout& t = s.nd_tensors[i];
    std::fprintf(out, "  %-18s on %-5s %s\n", t.sbp.c_str(), t.hierarchy.c_str(), t.lbn.c_str());
  }
  if (s.nd_tensors.size() > kListLimit) {
    std::fprintf(out, "  ... %zu more (--json lists all)\n", s.nd_tensors.size() - kListLimit);
  }
}

// Fused all-reduce buckets (CollectiveConf.member): how many, and each one's
// members.
void PrintBuckets(std::FILE* out, const PlanSummary& s) {
  int buckets = 0, members = 0, scatters = 0, gathers = 0;
  for (const auto& b : s.boxing) {
    if (b.members.empty()) continue;
    ++buckets;
    members += static_cast<int>(b.members.size());
    scatters += b.member_reduce_scatters;
    gathers += b.member_all_gathers;
  }
  if (buckets == 0) return;
  if (scatters + gathers == 0) {
    std::fprintf(out, "  fused all-reduce buckets: %d, of %d all-reduces\n", buckets, members);
  } else {
    std::fprintf(out,
                 "  fused all-reduce buckets: %d, of %d conversions (%d all-reduces, %d "
                 "reduce-scatters and %d all-gathers run as all-reduces)\n",
                 buckets, members, members - scatters - gathers, scatters, gathers);
  }
  for (const auto& b : s.boxing) {
    if (b.members.empty()) continue;
    std::string list;
    for (const std::string& m : b.members) list += (list.empty() ? "" : ", ") + m;
    std::fprintf(out, "    %s: %s: %s\n", b.lbn.c_str(), AlgorithmText(b).c_str(), list.c_str());
  }
}

// "CUDA graph replay: yes (cuda:0: one captured task, 12 ops); replayed:
// 'compute-graph@m0:cuda:0'" or "... no (why)". The note says, per GPU,
// what is replayed or why its compute tasks stay stream-ordered.
std::string GraphText(const Plan& plan) {
  if (!plan.graph_capturable()) return "CUDA graph replay: no (" + plan.graph_note() + ")";
  std::string text = "CUDA graph replay: yes";
  if (!plan.graph_note().empty()) text += " (" + plan.graph_note() + ")";
  std::string replayed;
  for (const TaskProto* t : ReplayedTasks(plan)) {
    replayed += (replayed.empty() ? "" : ", ") + ("'" + t->name() + "'");
  }
  return text + "; replayed: " + (replayed.empty() ? "none (one task per op)" : replayed);
}

// The schedule of a micro-batched plan (Plan.pipeline): one line of
// figures, then each stage's order of forward (F k) and backward (B k)
// units.
void PrintPipeline(std::FILE* out, const PipelinePlan& p) {
  const int64_t stages = p.stage_size();
  std::fprintf(out,
               "\npipeline schedule: %s, %lld micro-batches, %lld stage(s), %lld control edge(s); "
               "bubble (S-1)/(M+S-1) = %lld/%lld = %.1f%%\n",
               PipelineScheduleName(p.schedule()).c_str(),
               static_cast<long long>(p.micro_batches()), static_cast<long long>(stages),
               static_cast<long long>(p.control_edges()), static_cast<long long>(stages - 1),
               static_cast<long long>(p.micro_batches() + stages - 1),
               100.0 * p.bubble_fraction());
  for (int64_t s = 0; s < stages; ++s) {
    const PipelineStage& stage = p.stage(s);
    std::string order;
    for (const PipelineUnit& unit : stage.unit()) {
      order += " " + std::string(unit.backward() ? "B" : "F") + std::to_string(unit.micro_batch());
    }
    std::fprintf(out, "  stage %lld (%s):%s\n", static_cast<long long>(s),
                 PlacementToString(stage.placement()).c_str(), order.c_str());
  }
}

void PrintAutoParallel(std::FILE* out, const AutoParallelReport& r) {
  std::fprintf(out, "\nlayout chosen by --auto-parallel: %s (of %lld compiled and simulated; "
                    "calibration %s, transport %s",
               r.chosen().c_str(), static_cast<long long>(r.evaluated()), r.calibration().c_str(),
               r.transport().c_str());
  if (r.memory_limit_bytes() > 0) {
    std::fprintf(out, ", memory limit %s per machine", HumanBytes(r.memory_limit_bytes()).c_str());
  }
  std::fprintf(out, ")\n");
  if (!r.note().empty()) std::fprintf(out, "  note: %s\n", r.note().c_str());
  for (const LayoutCandidate& c : r.candidate()) {
    std::string note = c.name() == r.chosen() ? "chosen: " + c.description() : c.description();
    if (!c.error().empty()) note = "not possible: " + c.error().substr(0, 120);
    if (c.over_memory_limit()) note = "over the memory limit";
    char time[32] = "-";
    if (c.error().empty()) std::snprintf(time, sizeof(time), "%.2f ms", c.predicted_step_us() / 1e3);
    std::fprintf(out, "  %-26s %11s predicted  %10s/machine  %s\n", c.name().c_str(), time,
                 HumanBytes(c.peak_machine_bytes()).c_str(), note.c_str());
  }
}

}  // namespace

void PrintPlanSummary(std::FILE* out, const Plan& plan) {
  const PlanSummary s = Summarize(plan);
  std::fprintf(out, "plan: job '%s', version %u, %d machine(s), %lld iteration(s)\n",
               plan.job().conf().name().c_str(), plan.version(), plan.machine_size(),
               static_cast<long long>(plan.total_iters()));
  std::fprintf(out,
               "run settings: seed %lld, %lld sample(s)/iteration, %s, %d variable(s); "
               "evaluation plan: %s\n",
               static_cast<long long>(plan.seed()), static_cast<long long>(plan.samples_per_iter()),
               plan.is_train() ? "training" : "inference", plan.variable_size(),
               EvalText(plan).c_str());
  const std::pair<int, int> edges = EdgeSyncCounts(plan);
  std::fprintf(out, "register edges: %d stream-ordered, %d waiting for an event; %s\n", edges.first,
               edges.second, GraphText(plan).c_str());
  std::fprintf(out,
               "%d actor(s), %d register desc(s), %zu cross-machine edge(s), %zu boxing "
               "conversion(s)\n\n",
               s.actor_count, s.regst_count, s.cross_machine_edges.size(), s.boxing.size());
  if (s.machines.empty()) return;
  std::fprintf(out, "%-8s %-16s %-22s %7s %10s %12s\n", "machine", "address", "devices", "actors",
               "registers", "memory");
  for (const MachineSummary& m : s.machines) {
    int64_t bytes = 0;
    for (const ZoneMemory& z : m.memory) bytes += z.size;
    std::fprintf(out, "%-8lld %-16s %-22s %7d %10d %12s\n", static_cast<long long>(m.machine_id),
                 Address(plan, m.machine_id).c_str(), Join(m.devices).c_str(), m.actor_count,
                 m.regst_count, HumanBytes(bytes).c_str());
  }
  std::fprintf(out, "\nactors by kind:\n  %-12s", "kind");
  for (const auto& m : s.machines)
    std::fprintf(out, " %6s", ("m" + std::to_string(m.machine_id)).c_str());
  std::fprintf(out, " %7s\n", "total");
  for (const auto& [type, total] : s.actors) {
    std::fprintf(out, "  %-12s", TaskTypeShortName(type).c_str());
    for (const auto& m : s.machines) {
      auto it = m.actors.find(type);
      std::fprintf(out, " %6d", it == m.actors.end() ? 0 : it->second);
    }
    std::fprintf(out, " %7d\n", total);
  }
  std::fprintf(out, "\nmemory per zone:\n  %-12s %12s %14s %12s %10s %12s\n", "zone", "peak",
               "without reuse", "saved", "registers", "variables");
  for (const auto& m : s.machines) {
    for (const ZoneMemory& z : m.memory) {
      std::fprintf(out, "  %-12s %12s %14s %12s %10lld %12s\n", ZoneName(z.zone).c_str(),
                   HumanBytes(z.size).c_str(), HumanBytes(z.bytes_without_reuse).c_str(),
                   HumanBytes(z.bytes_without_reuse - z.size).c_str(),
                   static_cast<long long>(z.regst_count), HumanBytes(z.variable_bytes).c_str());
    }
  }
  if (!s.boxing.empty()) {
    std::map<std::string, int> by_kind;
    for (const auto& b : s.boxing) by_kind[BoxingKindName(b.kind)]++;
    std::fprintf(out, "\nboxing conversions:");
    for (const auto& [kind, n] : by_kind) std::fprintf(out, " %s x%d", kind.c_str(), n);
    std::fprintf(out, "\n");
    std::map<std::string, int> by_algorithm;
    for (const auto& b : s.boxing) {
      if (b.spans_machines) by_algorithm[CollectiveAlgorithmName(b.algorithm)]++;
    }
    if (!by_algorithm.empty()) {
      std::fprintf(out, "  collective algorithms (compiled):");
      for (const auto& [name, n] : by_algorithm) std::fprintf(out, " %s x%d", name.c_str(), n);
      std::fprintf(out, "\n");
      if (!plan.collective_note().empty()) {
        std::fprintf(out, "  chosen by: %s\n", plan.collective_note().c_str());
      }
    }
    PrintBuckets(out, s);
    for (size_t i = 0; i < s.boxing.size() && i < kListLimit; ++i) {
      const auto& b = s.boxing[i];
      std::fprintf(out, "  %-15s %-5s -> %-5s %3d task(s)  %-24s %s\n",
                   BoxingKindName(b.kind).c_str(), b.in_sbp.c_str(), b.out_sbp.c_str(), b.tasks,
                   AlgorithmText(b).c_str(), b.lbn.c_str());
      if (!b.hierarchy.empty()) std::fprintf(out, "%s", NdStepText(b).c_str());
    }
    if (s.boxing.size() > kListLimit) {
      std::fprintf(out, "  ... %zu more (--json lists all)\n", s.boxing.size() - kListLimit);
    }
  }
  PrintNdTensors(out, s);
  if (!s.cross_machine_edges.empty()) {
    std::map<std::tuple<int64_t, int64_t, std::string>, std::pair<int, int64_t>> groups;
    for (const auto& e : s.cross_machine_edges) {
      auto& g = groups[{e.src_machine, e.dst_machine, StrategyName(e.strategy)}];
      g.first++;
      g.second += e.bytes;
    }
    std::fprintf(out, "\ncross-machine edges (CommNet):\n  %-10s %-10s %6s %12s\n", "from->to",
                 "strategy", "edges", "bytes/iter");
    for (const auto& [key, g] : groups) {
      std::string route =
          "m" + std::to_string(std::get<0>(key)) + "->m" + std::to_string(std::get<1>(key));
      std::fprintf(out, "  %-10s %-10s %6d %12s\n", route.c_str(), std::get<2>(key).c_str(),
                   g.first, HumanBytes(g.second).c_str());
    }
    for (size_t i = 0; i < s.cross_machine_edges.size() && i < kListLimit; ++i) {
      const auto& e = s.cross_machine_edges[i];
      std::fprintf(out, "    m%lld->m%lld %-10s %10s  %s\n", static_cast<long long>(e.src_machine),
                   static_cast<long long>(e.dst_machine), StrategyName(e.strategy).c_str(),
                   HumanBytes(e.bytes).c_str(), e.what.c_str());
    }
    if (s.cross_machine_edges.size() > kListLimit) {
      std::fprintf(out, "    ... %zu more (--json lists all)\n",
                   s.cross_machine_edges.size() - kListLimit);
    }
  }
  if (plan.has_pipeline()) PrintPipeline(out, plan.pipeline());
  if (plan.has_auto_parallel()) PrintAutoParallel(out, plan.auto_parallel());
}

}  // namespace compiler
}  // namespace oflite
