#include "oneflow_lite/compiler/plan_summary.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace oflite {
namespace compiler {
namespace {

std::string SbpText(const NdSbp& nd) {
  std::string out;
  for (const SbpParallel& s : nd.sbp()) {
    if (!out.empty()) out += ",";
    switch (s.parallel_type_case()) {
      case SbpParallel::kSplitAxis: out += "S(" + std::to_string(s.split_axis()) + ")"; break;
      case SbpParallel::kBroadcast: out += "B"; break;
      case SbpParallel::kPartialSum: out += "P"; break;
      default: out += "?";
    }
  }
  return out;
}

std::string DeviceText(const TaskProto& t) {
  return std::string(t.device_type() == DEVICE_CUDA ? "cuda:" : "cpu:") +
         std::to_string(t.device_index());
}

std::string HierarchyText(const ShapeProto& hierarchy) {
  std::string text;
  for (int k = 0; k < hierarchy.dim_size(); ++k) {
    text += (k ? "x" : "") + std::to_string(hierarchy.dim(k));
  }
  return text;
}

// The n-D facts of one task of an n-D boxing step (every task of the step
// adds its sub-group once).
void AddNdFacts(const BoxingConf& b, BoxingConversion* c) {
  c->hierarchy = HierarchyText(b.hierarchy());
  c->axis = b.hierarchy_axis();
  c->nd_in_sbp = NdSbpText(b.nd_in_sbp());
  c->nd_out_sbp = NdSbpText(b.nd_out_sbp());
  std::string group = "{";
  for (int i = 0; i < b.group_parallel_id_size(); ++i) {
    group += (i ? "," : "") + std::to_string(b.group_parallel_id(i));
  }
  group += "}";
  if (std::find(c->groups.begin(), c->groups.end(), group) == c->groups.end()) {
    c->groups.push_back(group);
    std::sort(c->groups.begin(), c->groups.end(), [](const std::string& a, const std::string& z) {
      return std::stoll(a.substr(1)) < std::stoll(z.substr(1));
    });
  }
}

// The outputs of an op task on a hierarchical placement, by lbn.
void AddNdTensors(const TaskProto& t, std::map<std::string, NdTensorLayout>* layouts) {
  for (const KernelConf& k : t.kernel()) {
    for (int i = 0; i < k.output_size() && i < k.output_sbp_size(); ++i) {
      const RegstDescProto* regst = nullptr;
      for (const RegstDescProto& r : t.produced()) {
        if (r.regst_desc_id() == k.output(i).regst_desc_id()) regst = &r;
      }
      if (regst == nullptr || regst->blob_size() == 0) continue;
      NdTensorLayout& layout = (*layouts)[regst->blob(0).lbn()];
      layout.lbn = regst->blob(0).lbn();
      layout.hierarchy = HierarchyText(t.parallel_ctx().hierarchy());
      layout.sbp = NdSbpText(k.output_sbp(i));
    }
  }
}

}  // namespace

std::string NdSbpText(const NdSbp& sbp) {
  if (sbp.sbp_size() == 1) return SbpText(sbp);
  std::string text = "(";
  for (int k = 0; k < sbp.sbp_size(); ++k) {
    NdSbp one;
    *one.add_sbp() = sbp.sbp(k);
    text += (k ? ", " : "") + SbpText(one);
  }
  return text + ")";
}

std::string ZoneName(const MemZoneId& zone) {
  std::string m = "m" + std::to_string(zone.machine_id()) + "/";
  switch (zone.type()) {
    case ZONE_HOST: return m + "host";
    case ZONE_PINNED_HOST: return m + "pinned";
    default:
      return m + (zone.device_type() == DEVICE_CUDA ? "cuda:" : "dev:") +
             std::to_string(zone.device_index());
  }
}

std::string TaskTypeShortName(TaskType type) {
  std::string name = TaskType_Name(type);
  if (name.rfind("TASK_", 0) == 0) name = name.substr(5);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

std::string BoxingKindName(BoxingKind kind) {
  std::string name = BoxingKind_Name(kind);
  if (name.rfind("BOXING_", 0) == 0) name = name.substr(7);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

std::string StrategyName(CrossMachineStrategy strategy) {
  switch (strategy) {
    case CM_STATIC_ZERO_COPY: return "zero-copy";
    case CM_BOUNCE_BUFFER: return "bounce";
    default: return "-";
  }
}

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

const RegstDescProto* FindRegst(const Plan& plan, int64_t regst_desc_id) {
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      for (const RegstDescProto& r : t.produced()) {
        if (r.regst_desc_id() == regst_desc_id) return &r;
      }
    }
  }
  return nullptr;
}

const TaskProto* FindTask(const Plan& plan, int64_t task_id) {
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.task_id() == task_id) return &t;
    }
  }
  return nullptr;
}

PlanSummary Summarize(const Plan& plan) {
  PlanSummary s;
  std::map<std::tuple<std::string, int, std::string, std::string>, BoxingConversion> boxing;
  std::map<std::string, NdTensorLayout> nd_tensors;
  for (const MachinePlan& m : plan.machine()) {
    MachineSummary ms;
    ms.machine_id = m.machine_id();
    for (const TaskProto& t : m.task()) {
      ms.actors[t.type()]++;
      s.actors[t.type()]++;
      ms.regst_count += t.produced_size();
      if (t.type() == TASK_COMPUTE || t.type() == TASK_VARIABLE || t.type() == TASK_COPY_H2D ||
          t.type() == TASK_COPY_D2H || (t.type() == TASK_SOURCE && t.device_type() == DEVICE_CPU)) {
        ms.devices.insert(DeviceText(t));
      }
      if (t.type() == TASK_BOXING || t.type() == TASK_COLLECTIVE) {
        const BoxingConf& b = t.boxing();
        // n-D steps: one conversion per (axis, whole layouts), all sub-groups.
        std::string in_key = SbpText(b.in_sbp());
        if (b.hierarchy().dim_size() > 0) {
          in_key += "|" + std::to_string(b.hierarchy_axis()) + "|" + NdSbpText(b.nd_in_sbp()) +
                    "|" + NdSbpText(b.nd_out_sbp());
        }
        auto key = std::make_tuple(b.lbn(), static_cast<int>(b.kind()), in_key,
                                   SbpText(b.out_sbp()));
        BoxingConversion& c = boxing[key];
        c.kind = b.kind();
        c.lbn = b.lbn();
        c.in_sbp = SbpText(b.in_sbp());
        c.out_sbp = SbpText(b.out_sbp());
        c.spans_machines = c.spans_machines || t.type() == TASK_COLLECTIVE;
        if (b.hierarchy().dim_size() > 0) AddNdFacts(b, &c);
        if (t.type() == TASK_COLLECTIVE) {
          c.algorithm = t.collective().algorithm();
          c.buffer_bytes = t.collective().buffer_bytes();
          c.members.clear();
          c.member_reduce_scatters = c.member_all_gathers = 0;
          for (const CollectiveMember& m : t.collective().member()) {
            c.members.push_back(m.lbn());
            c.member_reduce_scatters += m.out_sbp().has_split_axis() ? 1 : 0;
            c.member_all_gathers += m.in_sbp().has_split_axis() ? 1 : 0;
          }
        }
        c.tasks++;
      }
      if (t.parallel_ctx().hierarchy().dim_size() > 0) AddNdTensors(t, &nd_tensors);
      if (t.type() == TASK_COMMNET) {
        CrossMachineEdge e;
        e.src_machine = t.commnet().src_machine_id();
        e.dst_machine = t.machine_id();
        const RegstDescProto& src = t.commnet().src_regst();
        e.what = src.blob_size() > 0 ? src.blob(0).lbn() : "ctrl";
        e.bytes = src.bytes_per_regst();
        e.strategy = src.cross_machine_strategy();
        e.src_regst_desc_id = t.commnet().src_regst_desc_id();
        e.commnet_task_id = t.task_id();
        s.cross_machine_edges.push_back(e);
      }
    }
    for (const MemBlockProto& b : m.mem_block()) {
      ZoneMemory zone{b.zone(), b.size(), b.bytes_without_reuse(), b.regst_count()};
      for (const TaskProto& t : m.task()) {
        for (const RegstDescProto& r : t.produced()) {
          if (r.is_persistent() && r.zone().SerializeAsString() == b.zone().SerializeAsString()) {
            zone.variable_bytes += r.bytes_per_regst() * r.regst_num();
          }
        }
      }
      ms.memory.push_back(zone);
    }
    ms.actor_count = m.task_size();
    s.actor_count += ms.actor_count;
    s.regst_count += ms.regst_count;
    s.machines.push_back(std::move(ms));
  }
  for (auto& [key, c] : boxing) s.boxing.push_back(c);
  for (auto& [lbn, layout] : nd_tensors) s.nd_tensors.push_back(layout);
  return s;
}

int CountBoxing(const PlanSummary& summary, BoxingKind kind) {
  return static_cast<int>(std::count_if(summary.boxing.begin(), summary.boxing.end(),
                                        [&](const BoxingConversion& c) { return c.kind == kind; }));
}

std::string CollectiveAlgorithmName(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case COLLECTIVE_ALL_TO_ALL: return "all_to_all";
    case COLLECTIVE_RING_ALL_REDUCE: return "ring_all_reduce";
    case COLLECTIVE_RING_REDUCE_SCATTER: return "ring_reduce_scatter";
    case COLLECTIVE_RING_ALL_GATHER: return "ring_all_gather";
    case COLLECTIVE_EXCHANGE_ALL_REDUCE: return "exchange_all_reduce";
    case COLLECTIVE_DOUBLING_ALL_REDUCE: return "doubling_all_reduce";
    case COLLECTIVE_SCATTER_GATHER_ALL_REDUCE: return "scatter_gather_all_reduce";
    default: return "unset";
  }
}

}  // namespace compiler
}  // namespace oflite
