// oflite inspect: what a Plan runs where, and how much memory it takes.
//
//   oflite inspect PLAN                 summary tables
//   oflite inspect PLAN --actors        one line per actor
//   oflite inspect PLAN --machine N     restrict to machine N
//   oflite inspect PLAN --actor ID      one actor in detail (id or name)
//   oflite inspect PLAN --json          the same as JSON
//   oflite inspect PLAN --dot           Graphviz digraph (dot -Tsvg)
// Bad plan files exit with 2 and a message naming the file.
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/compiler/plan_summary.h"
#include "oneflow_lite/compiler/plan_summary_text.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "proto/plan.pb.h"
#include "tools/oflite/commands.h"
#include "oneflow_lite/session/flags.h"

namespace oflite {
namespace cli {
namespace {

using compiler::Address;
using compiler::EdgeSyncCounts;
using compiler::HumanBytes;
using compiler::PlanSummary;
using compiler::ReplayedTasks;

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string Q(const std::string& s) { return "\"" + JsonEscape(s) + "\""; }

// {"compute":3,"source":1,...}: actor counts by task kind.
std::string KindCountsJson(const std::map<TaskType, int>& counts) {
  std::string out = "{";
  for (const auto& [type, n] : counts) {
    out += (out.size() > 1 ? "," : "") + Q(compiler::TaskTypeShortName(type)) + ":" +
           std::to_string(n);
  }
  return out + "}";
}

// The plan restricted to one machine (or the whole plan for -1).
Plan Restrict(const Plan& plan, int64_t machine) {
  if (machine < 0) return plan;
  Plan out = plan;
  out.clear_machine();
  for (const MachinePlan& m : plan.machine()) {
    if (m.machine_id() == machine) *out.add_machine() = m;
  }
  return out;
}

std::string EvalJson(const Plan& plan) {
  static const char* const kStates[] = {"none", "compiled", "no_test_split", "unavailable"};
  const int state = static_cast<int>(plan.eval_state());
  std::string out = "{\"state\":" + Q(state >= 0 && state < 4 ? kStates[state] : "unknown");
  if (plan.eval_state() == EVAL_COMPILED) {
    int actors = 0;
    for (const MachinePlan& m : plan.eval_plan().machine()) actors += m.task_size();
    out += ",\"actors\":" + std::to_string(actors) +
           ",\"total_iters\":" + std::to_string(plan.eval_plan().total_iters());
  }
  if (!plan.eval_note().empty()) out += ",\"note\":" + Q(plan.eval_note());
  return out + "}";
}

std::string DeviceOf(const TaskProto& t) {
  return std::string(t.device_type() == DEVICE_CUDA ? "cuda:" : "cpu:") +
         std::to_string(t.device_index());
}

std::string ProducedText(const TaskProto& t) {
  std::string out;
  for (const RegstDescProto& r : t.produced()) {
    if (!out.empty()) out += " ";
    out += r.name() + "x" + std::to_string(r.regst_num());
    if (r.bytes_per_regst() > 0) out += "(" + HumanBytes(r.bytes_per_regst()) + ")";
  }
  return out.empty() ? "-" : out;
}

void PrintActors(const Plan& plan) {
  std::printf("%-22s %-11s %-4s %-7s %-3s %-5s %-4s %-28s %s\n", "id", "kind", "m", "device",
              "s", "topo", "in", "out", "name");
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      int consumed = 0;
      for (const ConsumedRegst& c : t.consumed()) consumed += c.regst_desc_id_size();
      std::printf("%-22s %-11s %-4lld %-7s %-3lld %-5lld %-4d %-28s %s\n",
                  TaskIdToString(t.task_id()).c_str(),
                  compiler::TaskTypeShortName(t.type()).c_str(),
                  static_cast<long long>(t.machine_id()), DeviceOf(t).c_str(),
                  static_cast<long long>(t.stream_id()), static_cast<long long>(t.topo_order()),
                  consumed, ProducedText(t).c_str(), t.name().c_str());
    }
  }
}

std::string TaskLabel(const Plan& plan, int64_t id) {
  const TaskProto* t = compiler::FindTask(plan, id);
  return TaskIdToString(id) + (t ? " " + t->name() : "");
}

std::string SbpText(const NdSbp& nd) {
  if (nd.sbp_size() >= 2) return compiler::NdSbpText(nd);  // "(S(0), B)"
  std::string out;
  for (const SbpParallel& s : nd.sbp()) {
    if (!out.empty()) out += ",";
    if (s.parallel_type_case() == SbpParallel::kSplitAxis) {
      out += "S(" + std::to_string(s.split_axis()) + ")";
    } else {
      out += s.parallel_type_case() == SbpParallel::kBroadcast ? "B" : "P";
    }
  }
  return out;
}

std::string SbpList(const google::protobuf::RepeatedPtrField<NdSbp>& list) {
  std::string out;
  for (const NdSbp& nd : list) out += (out.empty() ? "" : ", ") + SbpText(nd);
  return out;
}

void PrintRegst(const Plan& plan, const RegstDescProto& r) {
  std::printf("    regst %lld '%s': regst_num %d, %s each in %s, offsets", 
              static_cast<long long>(r.regst_desc_id()), r.name().c_str(), r.regst_num(),
              HumanBytes(r.bytes_per_regst()).c_str(), compiler::ZoneName(r.zone()).c_str());
  for (int64_t o : r.mem_offset()) std::printf(" %lld", static_cast<long long>(o));
  std::printf(", live [%lld, %lld]%s%s%s%s\n", static_cast<long long>(r.lifetime_begin()),
              static_cast<long long>(r.lifetime_end()), r.is_persistent() ? ", persistent" : "",
              r.is_ctrl() ? ", control" : "", r.memory_reused() ? ", shares memory" : "",
              r.cross_machine_strategy() != CM_NONE
                  ? (", cross-machine " + compiler::StrategyName(r.cross_machine_strategy())).c_str()
                  : "");
  for (const BlobInRegst& b : r.blob()) {
    std::printf("      blob %s %s\n", b.lbn().c_str(), TensorDesc(b.desc()).ToString().c_str());
  }
  for (int k = 0; k < r.consumer_task_id_size(); ++k) {
    const int64_t c = r.consumer_task_id(k);
    bool mutator = false;
    for (int64_t m : r.mutator_task_id()) mutator = mutator || m == c;
    const bool stream = k < r.consumer_sync_size() && r.consumer_sync(k) == EDGE_STREAM_ORDER;
    std::printf("      -> %s%s [%s]\n", TaskLabel(plan, c).c_str(), mutator ? " (in place)" : "",
                stream ? "stream order" : "event");
  }
}

void PrintActor(const Plan& plan, const TaskProto& t) {
  std::printf("actor %s (%lld)\n  name: %s\n  kind: %s\n  where: machine %lld, %s, stream %lld, "
              "topo %lld\n  parallel: %lld of %lld\n",
              TaskIdToString(t.task_id()).c_str(), static_cast<long long>(t.task_id()),
              t.name().c_str(), compiler::TaskTypeShortName(t.type()).c_str(),
              static_cast<long long>(t.machine_id()), DeviceOf(t).c_str(),
              static_cast<long long>(t.stream_id()), static_cast<long long>(t.topo_order()),
              static_cast<long long>(t.parallel_ctx().parallel_id()),
              static_cast<long long>(t.parallel_ctx().parallel_num()));
  if (t.graph_replay()) {
    std::printf("  graph replay: this act may be captured once per set of register copies "
                "and replayed (%d kernels)\n",
                t.kernel_size());
  }
  for (const KernelConf& k : t.kernel()) {
    std::printf("  kernel %s (%s, %s): %s -> %s\n", k.op().name().c_str(), k.op().op_type().c_str(),
                DataTypeName(k.dtype()), SbpList(k.input_sbp()).c_str(),
                SbpList(k.output_sbp()).c_str());
    for (const BlobBinding& b : k.input()) {
      std::printf("    in  %s[%d] <- regst %lld\n", b.arg().c_str(), b.index(),
                  static_cast<long long>(b.regst_desc_id()));
    }
    for (const BlobBinding& b : k.output()) {
      std::printf("    out %s[%d] -> regst %lld\n", b.arg().c_str(), b.index(),
                  static_cast<long long>(b.regst_desc_id()));
    }
  }
  if (t.type() == TASK_BOXING || t.type() == TASK_COLLECTIVE) {
    const BoxingConf& b = t.boxing();
    std::printf("  boxing %s of %s: %s -> %s, part %lld of %lld\n",
                compiler::BoxingKindName(b.kind()).c_str(), b.lbn().c_str(),
                SbpText(b.in_sbp()).c_str(), SbpText(b.out_sbp()).c_str(),
                static_cast<long long>(b.out_parallel_id()), static_cast<long long>(b.parallel_num()));
    if (b.hierarchy().dim_size() > 0) {
      std::string group;
      for (int64_t id : b.group_parallel_id()) group += (group.empty() ? "" : ",") + std::to_string(id);
      std::string hierarchy;
      for (int64_t h : b.hierarchy().dim()) hierarchy += (hierarchy.empty() ? "" : "x") + std::to_string(h);
      std::printf("  n-D step: axis %lld of %s, group {%s}: %s -> %s\n",
                  static_cast<long long>(b.hierarchy_axis()), hierarchy.c_str(), group.c_str(),
                  SbpText(b.nd_in_sbp()).c_str(), SbpText(b.nd_out_sbp()).c_str());
    }
    for (int64_t r : b.ring_task_id()) std::printf("    ring: %s\n", TaskLabel(plan, r).c_str());
  }
  if (t.type() == TASK_COLLECTIVE) {
    const CollectiveConf& c = t.collective();
    std::printf("  collective algorithm %s", compiler::CollectiveAlgorithmName(c.algorithm()).c_str());
    if (c.buffer_bytes() > 0) {
      std::printf(": buffer %s (%lld elements), chunks of %s, %d slot(s)",
                  HumanBytes(c.buffer_bytes()).c_str(), static_cast<long long>(c.element_count()),
                  HumanBytes(c.chunk_bytes()).c_str(), c.slots());
    }
    std::printf("\n");
    if (c.member_size() > 0) std::printf("  fused bucket of %d all-reduces:\n", c.member_size());
    for (const CollectiveMember& m : c.member()) {
      // A member's own conversion when it is not P -> B.
      std::string own;
      if (m.in_sbp().has_split_axis()) {
        own = " (all-gather S(" + std::to_string(m.in_sbp().split_axis()) + ") -> B)";
      } else if (m.out_sbp().has_split_axis()) {
        own = " (reduce-scatter P -> S(" + std::to_string(m.out_sbp().split_axis()) + "))";
      }
      std::printf("    %s %s: regst %lld -> regst %lld, from element %lld%s\n", m.lbn().c_str(),
                  TensorDesc(m.logical_desc()).ToString().c_str(),
                  static_cast<long long>(m.in_regst_desc_id()),
                  static_cast<long long>(m.out_regst_desc_id()),
                  static_cast<long long>(m.element_offset()), own.c_str());
    }
  }
  if (t.type() == TASK_COMMNET) {
    std::printf("  pulls regst %lld from %s\n",
                static_cast<long long>(t.commnet().src_regst_desc_id()),
                TaskLabel(plan, t.commnet().src_task_id()).c_str());
  }
  for (const SinkMetric& m : t.sink().metric()) {
    std::printf("  metric %s = %s (consumed as '%s')\n", m.name().c_str(), m.lbn().c_str(),
                m.consumed_name().c_str());
  }
  std::printf("  consumes:\n");
  for (const ConsumedRegst& c : t.consumed()) {
    for (int64_t id : c.regst_desc_id()) {
      const RegstDescProto* r = compiler::FindRegst(plan, id);
      std::printf("    %s: regst %lld from %s\n", c.name().c_str(), static_cast<long long>(id),
                  r ? TaskLabel(plan, r->producer_task_id()).c_str() : "(another machine)");
    }
  }
  std::printf("  produces:\n");
  for (const RegstDescProto& r : t.produced()) PrintRegst(plan, r);
}

const TaskProto* FindActor(const Plan& plan, const std::string& key) {
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.name() == key || std::to_string(t.task_id()) == key ||
          TaskIdToString(t.task_id()) == key) {
        return &t;
      }
    }
  }
  return nullptr;
}

void PrintJson(const Plan& plan, const PlanSummary& s, bool actors) {
  std::ostringstream os;
  os << "{\"job\":" << Q(plan.job().conf().name()) << ",\"version\":" << plan.version()
     << ",\"total_iters\":" << plan.total_iters() << ",\"seed\":" << plan.seed()
     << ",\"samples_per_iter\":" << plan.samples_per_iter()
     << ",\"is_train\":" << (plan.is_train() ? "true" : "false")
     << ",\"variables\":" << plan.variable_size() << ",\"eval_plan\":" << EvalJson(plan)
     << ",\"stream_ordered_edges\":" << EdgeSyncCounts(plan).first
     << ",\"event_edges\":" << EdgeSyncCounts(plan).second
     << ",\"graph_capturable\":" << (plan.graph_capturable() ? "true" : "false")
     << ",\"graph_note\":" << Q(plan.graph_note())
     << ",\"collective_note\":" << Q(plan.collective_note()) << ",\"graph_replay_tasks\":[";
  bool first_replayed = true;
  for (const TaskProto* t : ReplayedTasks(plan)) {
    os << (first_replayed ? "" : ",") << "{\"name\":" << Q(t->name())
       << ",\"id\":" << Q(TaskIdToString(t->task_id())) << ",\"device\":" << Q(DeviceOf(*t))
       << ",\"kernels\":" << t->kernel_size() << "}";
    first_replayed = false;
  }
  os << "]"
     << ",\"actors\":" << s.actor_count
     << ",\"registers\":" << s.regst_count << ",\"actors_by_kind\":" << KindCountsJson(s.actors)
     << ",\"machines\":[";
  for (size_t i = 0; i < s.machines.size(); ++i) {
    const auto& m = s.machines[i];
    os << (i ? "," : "") << "{\"id\":" << m.machine_id << ",\"address\":"
       << Q(Address(plan, m.machine_id)) << ",\"actors\":" << m.actor_count
       << ",\"registers\":" << m.regst_count << ",\"devices\":[";
    bool f = true;
    for (const std::string& d : m.devices) {
      os << (f ? "" : ",") << Q(d);
      f = false;
    }
    os << "],\"actors_by_kind\":" << KindCountsJson(m.actors) << ",\"memory\":[";
    for (size_t z = 0; z < m.memory.size(); ++z) {
      const auto& zm = m.memory[z];
      os << (z ? "," : "") << "{\"zone\":" << Q(compiler::ZoneName(zm.zone))
         << ",\"peak_bytes\":" << zm.size << ",\"bytes_without_reuse\":" << zm.bytes_without_reuse
         << ",\"saved_bytes\":" << zm.bytes_without_reuse - zm.size
         << ",\"registers\":" << zm.regst_count << ",\"variable_bytes\":" << zm.variable_bytes
         << "}";
    }
    os << "]}";
  }
  os << "],\"boxing\":[";
  for (size_t i = 0; i < s.boxing.size(); ++i) {
    const auto& b = s.boxing[i];
    os << (i ? "," : "") << "{\"kind\":" << Q(compiler::BoxingKindName(b.kind))
       << ",\"lbn\":" << Q(b.lbn) << ",\"in\":" << Q(b.in_sbp) << ",\"out\":" << Q(b.out_sbp)
       << ",\"tasks\":" << b.tasks << ",\"ring\":" << (b.spans_machines ? "true" : "false");
    if (!b.hierarchy.empty()) {
      os << ",\"hierarchy\":" << Q(b.hierarchy) << ",\"axis\":" << b.axis
         << ",\"nd_in\":" << Q(b.nd_in_sbp) << ",\"nd_out\":" << Q(b.nd_out_sbp) << ",\"groups\":[";
      for (size_t g = 0; g < b.groups.size(); ++g) os << (g ? "," : "") << Q(b.groups[g]);
      os << "]";
    }
    if (b.spans_machines) {
      os << ",\"algorithm\":" << Q(compiler::CollectiveAlgorithmName(b.algorithm))
         << ",\"buffer_bytes\":" << b.buffer_bytes;
      if (!b.members.empty()) {
        os << ",\"members\":[";
        for (size_t m = 0; m < b.members.size(); ++m) os << (m ? "," : "") << Q(b.members[m]);
        os << "]";
      }
    }
    os << "}";
  }
  os << "]";
  if (!s.nd_tensors.empty()) {
    os << ",\"nd_sbp\":[";
    for (size_t i = 0; i < s.nd_tensors.size(); ++i) {
      const auto& t = s.nd_tensors[i];
      os << (i ? "," : "") << "{\"lbn\":" << Q(t.lbn) << ",\"hierarchy\":" << Q(t.hierarchy)
         << ",\"sbp\":" << Q(t.sbp) << "}";
    }
    os << "]";
  }
  os << ",\"cross_machine_edges\":[";
  for (size_t i = 0; i < s.cross_machine_edges.size(); ++i) {
    const auto& e = s.cross_machine_edges[i];
    os << (i ? "," : "") << "{\"from\":" << e.src_machine << ",\"to\":" << e.dst_machine
       << ",\"what\":" << Q(e.what) << ",\"bytes\":" << e.bytes
       << ",\"strategy\":" << Q(compiler::StrategyName(e.strategy))
       << ",\"regst_desc_id\":" << e.src_regst_desc_id << ",\"commnet_task_id\":"
       << e.commnet_task_id << "}";
  }
  os << "]";
  if (actors) {
    os << ",\"actor_list\":[";
    bool f = true;
    for (const MachinePlan& m : plan.machine()) {
      for (const TaskProto& t : m.task()) {
        os << (f ? "" : ",") << "{\"id\":" << t.task_id() << ",\"id_text\":"
           << Q(TaskIdToString(t.task_id())) << ",\"name\":" << Q(t.name())
           << ",\"kind\":" << Q(compiler::TaskTypeShortName(t.type()))
           << ",\"machine\":" << t.machine_id() << ",\"device\":" << Q(DeviceOf(t))
           << ",\"stream\":" << t.stream_id() << ",\"topo_order\":" << t.topo_order();
        if (t.type() == TASK_COLLECTIVE) {
          os << ",\"algorithm\":" << Q(compiler::CollectiveAlgorithmName(t.collective().algorithm()));
        }
        os << "}";
        f = false;
      }
    }
    os << "]";
  }
  os << "}\n";
  std::fputs(os.str().c_str(), stdout);
}

std::string DotId(int64_t id) { return "t" + std::to_string(id); }

void PrintDot(const Plan& plan) {
  std::printf("digraph plan {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n");
  std::set<int64_t> present;
  for (const MachinePlan& m : plan.machine()) {
    std::printf("  subgraph cluster_m%lld {\n    label=\"machine %lld\";\n",
                static_cast<long long>(m.machine_id()), static_cast<long long>(m.machine_id()));
    for (const TaskProto& t : m.task()) {
      present.insert(t.task_id());
      const char* color = "black";
      switch (t.type()) {
        case TASK_BOXING: case TASK_COLLECTIVE: color = "blue"; break;
        case TASK_COMMNET: color = "red"; break;
        case TASK_VARIABLE: color = "darkgreen"; break;
        case TASK_SOURCE: case TASK_SINK: color = "purple"; break;
        case TASK_COPY_H2D: case TASK_COPY_D2H: color = "orange"; break;
        default: break;
      }
      std::printf("    %s [label=\"%s\\n%s %s\", color=%s];\n", DotId(t.task_id()).c_str(),
                  JsonEscape(t.name()).c_str(), compiler::TaskTypeShortName(t.type()).c_str(),
                  DeviceOf(t).c_str(), color);
    }
    std::printf("  }\n");
  }
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      for (const RegstDescProto& r : t.produced()) {
        for (int64_t c : r.consumer_task_id()) {
          if (!present.count(c)) continue;
          std::string label = r.is_ctrl() ? "" : r.name() + " x" + std::to_string(r.regst_num());
          std::printf("  %s -> %s [label=\"%s\"%s];\n", DotId(t.task_id()).c_str(),
                      DotId(c).c_str(), JsonEscape(label).c_str(),
                      r.is_ctrl() ? ", style=dashed" : "");
        }
      }
    }
  }
  std::printf("}\n");
}

}  // namespace

int RunInspect(int argc, char** argv) {
  FlagSet flags("oflite inspect", "PLAN.pb [--actors] [--machine N] [--actor ID] [--json] [--dot]",
                {{"actors", "list every actor, one line each", true},
                 {"machine", "only this machine", false, "-1"},
                 {"actor", "one actor in detail: numeric id, m0/cpu0/s0/t3 form, or name"},
                 {"json", "print JSON instead of tables", true},
                 {"dot", "print a Graphviz digraph of the actors", true}},
                /*max_positional=*/1);
  if (std::optional<int> done = flags.ParseCommandLine(argc, argv, "oflite inspect")) {
    return *done;
  }
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "oflite inspect: expected one plan file (see 'oflite inspect --help')\n");
    return kExitBadInput;
  }
  StatusOr<int64_t> machine = flags.GetInt("machine", -1, INT32_MAX);
  if (!machine.ok()) {
    std::fprintf(stderr, "oflite inspect: %s\n", machine.status().message().c_str());
    return kExitBadInput;
  }
  StatusOr<Plan> loaded = LoadPlan(flags.positional()[0]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "oflite inspect: %s\n", loaded.status().message().c_str());
    return kExitBadInput;
  }
  Status verified = VerifyPlan(*loaded);
  if (!verified.ok()) {
    std::fprintf(stderr, "oflite inspect: plan '%s': %s\n", flags.positional()[0].c_str(),
                 verified.message().c_str());
    return kExitBadInput;
  }
  if (*machine >= 0 && *machine >= loaded->machine_size()) {
    std::fprintf(stderr, "oflite inspect: --machine %lld: the plan has %d machine(s)\n",
                 static_cast<long long>(*machine), loaded->machine_size());
    return kExitBadInput;
  }
  const Plan plan = Restrict(*loaded, *machine);
  if (flags.Has("actor")) {
    const TaskProto* t = FindActor(plan, flags.Get("actor"));
    if (t == nullptr) {
      std::fprintf(stderr, "oflite inspect: no actor '%s' in %s\n", flags.Get("actor").c_str(),
                   flags.positional()[0].c_str());
      return kExitBadInput;
    }
    if (flags.GetBool("json")) {
      std::string json;
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = true;
      if (!google::protobuf::util::MessageToJsonString(*t, &json, options).ok()) return kExitFailure;
      std::fputs(json.c_str(), stdout);
    } else {
      PrintActor(*loaded, *t);
    }
    return kExitOk;
  }
  if (flags.GetBool("dot")) {
    PrintDot(plan);
    return kExitOk;
  }
  if (flags.GetBool("json")) {
    PrintJson(plan, compiler::Summarize(plan), flags.GetBool("actors"));
  } else if (flags.GetBool("actors")) {
    PrintActors(plan);
  } else {
    compiler::PrintPlanSummary(stdout, plan);
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace oflite
