#include "oneflow_lite/compiler/pipeline_schedule.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include "oneflow_lite/common/placement_text.h"

namespace oflite {
namespace compiler {
namespace {

// An op's placement: its own, else the job's default, else "0:cpu:0".
PlacementProto PlacementOf(const Job& job, const OpConf& op) {
  if (op.has_placement()) return op.placement();
  if (job.conf().has_default_placement()) return job.conf().default_placement();
  PlacementProto p;
  p.set_device_type(DEVICE_CPU);
  p.add_machine_id(0);
  p.add_device_id(0);
  return p;
}

// The data and control edges of a job, by op index.
struct JobEdges {
  std::vector<std::vector<int>> producers;  // data producers of each op (deduplicated)
  std::vector<std::vector<int>> consumers;  // data consumers of each op
};

JobEdges DataEdges(const Job& job) {
  std::map<std::string, int> producer_of;
  for (int i = 0; i < job.op_size(); ++i) {
    for (const ArgProto& arg : job.op(i).output()) {
      for (const std::string& lbn : arg.lbn()) producer_of[lbn] = i;
    }
  }
  JobEdges edges;
  edges.producers.resize(job.op_size());
  edges.consumers.resize(job.op_size());
  for (int i = 0; i < job.op_size(); ++i) {
    std::set<int> producers;
    for (const ArgProto& arg : job.op(i).input()) {
      for (const std::string& lbn : arg.lbn()) {
        auto it = producer_of.find(lbn);
        if (it != producer_of.end()) producers.insert(it->second);
      }
    }
    for (int p : producers) {
      edges.producers[i].push_back(p);
      edges.consumers[p].push_back(i);
    }
  }
  return edges;
}

// Kahn's algorithm over data and control edges, lowest index first; fewer
// than job.op_size() entries when there is a cycle. Unknown names and lbns
// are left to the compiler's own checks.
std::vector<int> TopologicalOps(const Job& job, const JobEdges& edges) {
  std::map<std::string, int> index_of;
  for (int i = 0; i < job.op_size(); ++i) index_of[job.op(i).name()] = i;
  std::vector<std::set<int>> successors(job.op_size());
  std::vector<int> in_degree(job.op_size(), 0);
  for (int i = 0; i < job.op_size(); ++i) {
    std::set<int> preds(edges.producers[i].begin(), edges.producers[i].end());
    for (const std::string& name : job.op(i).control_input()) {
      auto it = index_of.find(name);
      if (it != index_of.end() && it->second != i) preds.insert(it->second);
    }
    for (int p : preds) {
      if (successors[p].insert(i).second) ++in_degree[i];
    }
  }
  std::set<int> ready;
  for (int i = 0; i < job.op_size(); ++i) {
    if (in_degree[i] == 0) ready.insert(i);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int s : successors[i]) {
      if (--in_degree[s] == 0) ready.insert(s);
    }
  }
  return order;
}

using UnitKey = std::tuple<int64_t, int64_t, bool>;  // stage, micro-batch, backward

// Stages by first appearance of a tagged forward op in `order`, and the ops
// of every unit.
struct Units {
  std::vector<PlacementProto> stages;
  std::map<UnitKey, std::vector<int>> ops;
};

StatusOr<Units> CollectUnits(const Job& job, const std::vector<int>& order,
                             int64_t micro_batches) {
  Units units;
  std::map<std::string, int64_t> stage_of;  // serialized placement -> stage
  auto stage_key = [&](const OpConf& op) {
    std::string key;
    PlacementOf(job, op).SerializeToString(&key);
    return key;
  };
  for (int i : order) {
    const OpConf& op = job.op(i);
    if (!op.has_micro_batch() || op.is_backward()) continue;
    const std::string key = stage_key(op);
    if (stage_of.count(key)) continue;
    stage_of[key] = static_cast<int64_t>(units.stages.size());
    units.stages.push_back(PlacementOf(job, op));
  }
  for (int i : order) {
    const OpConf& op = job.op(i);
    if (!op.has_micro_batch()) continue;
    if (op.micro_batch() < 0 || op.micro_batch() >= micro_batches) {
      return InvalidArgumentError("op '", op.name(), "' (", op.op_type(), "): micro_batch ",
                                  op.micro_batch(), " outside [0, ", micro_batches, ")");
    }
    auto stage = stage_of.find(stage_key(op));
    if (stage == stage_of.end()) {
      return InvalidArgumentError("op '", op.name(), "' (", op.op_type(),
                                  "): a backward op of micro-batch ", op.micro_batch(), " on ",
                                  PlacementToString(PlacementOf(job, op)),
                                  ", where no forward op of a micro-batch runs");
    }
    units.ops[{stage->second, op.micro_batch(), op.is_backward()}].push_back(i);
  }
  return units;
}

// Adds control inputs so that every op of `next` waits for every op of
// `previous`; returns how many were added.
int64_t ChainUnits(const std::vector<int>& previous, const std::vector<int>& next,
                   const JobEdges& edges, Job* job) {
  const std::set<int> in_previous(previous.begin(), previous.end());
  const std::set<int> in_next(next.begin(), next.end());
  std::vector<std::string> last;  // ops of `previous` no op of it reads
  for (int i : previous) {
    bool read_inside = false;
    for (int c : edges.consumers[i]) read_inside = read_inside || in_previous.count(c) > 0;
    if (!read_inside) last.push_back(job->op(i).name());
  }
  int64_t added = 0;
  for (int i : next) {
    bool fed_inside = false;
    for (int p : edges.producers[i]) fed_inside = fed_inside || in_next.count(p) > 0;
    if (fed_inside) continue;
    OpConf* op = job->mutable_op(i);
    const std::set<std::string> existing(op->control_input().begin(), op->control_input().end());
    for (const std::string& name : last) {
      if (existing.count(name)) continue;
      op->add_control_input(name);
      ++added;
    }
  }
  return added;
}

}  // namespace

std::string ScheduleUnit::ToString() const {
  return (backward ? "B" : "F") + std::to_string(micro_batch);
}

std::vector<ScheduleUnit> StageOrder(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                     int64_t micro_batches) {
  CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches";
  std::vector<ScheduleUnit> order;
  if (schedule == PIPELINE_GPIPE) {
    for (int64_t k = 0; k < micro_batches; ++k) order.push_back({k, false});
    for (int64_t k = 0; k < micro_batches; ++k) order.push_back({k, true});
    return order;
  }
  CHECK(schedule == PIPELINE_1F1B) << "schedule " << PipelineSchedule_Name(schedule);
  const int64_t warmup = std::min(stages - stage - 1, micro_batches);
  for (int64_t k = 0; k < warmup; ++k) order.push_back({k, false});
  for (int64_t k = 0; k + warmup < micro_batches; ++k) {
    order.push_back({k + warmup, false});
    order.push_back({k, true});
  }
  for (int64_t k = micro_batches - warmup; k < micro_batches; ++k) order.push_back({k, true});
  return order;
}

double BubbleFraction(int64_t stages, int64_t micro_batches) {
  if (stages < 1 || micro_batches < 1) return 0.0;
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

std::string PipelineScheduleName(PipelineSchedule schedule) {
  switch (schedule) {
    case PIPELINE_GPIPE:
      return "gpipe";
    case PIPELINE_1F1B:
      return "1f1b";
    default:
      return "unset";
  }
}

StatusOr<PipelineSchedule> ParsePipelineSchedule(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "gpipe") return PIPELINE_GPIPE;
  if (lower == "1f1b") return PIPELINE_1F1B;
  return InvalidArgumentError("unknown pipeline schedule '", text,
                              "'; use gpipe (fill-drain) or 1f1b (one forward, one backward)");
}

StatusOr<PipelinePlan> SchedulePipeline(Job* job) {
  const PipelineConf& conf = job->conf().pipeline();
  const int64_t micro_batches = conf.micro_batches();
  if (micro_batches < 2) {
    return InvalidArgumentError("job conf: pipeline.micro_batches is ", micro_batches,
                                "; a micro-batched job has at least 2");
  }
  if (conf.schedule() != PIPELINE_GPIPE && conf.schedule() != PIPELINE_1F1B) {
    return InvalidArgumentError("job conf: pipeline.schedule is unset; use gpipe or 1f1b");
  }
  const JobEdges edges = DataEdges(*job);
  const std::vector<int> order = TopologicalOps(*job, edges);
  // A cycle of the job's own: the compiler reports it, naming the ops.
  if (static_cast<int>(order.size()) != job->op_size()) return PipelinePlan();
  ASSIGN_OR_RETURN(Units units, CollectUnits(*job, order, micro_batches));
  const int64_t stages = static_cast<int64_t>(units.stages.size());
  PipelinePlan plan;
  plan.set_micro_batches(micro_batches);
  plan.set_schedule(conf.schedule());
  plan.set_bubble_fraction(BubbleFraction(stages, micro_batches));
  int64_t added = 0;
  for (int64_t s = 0; s < stages; ++s) {
    PipelineStage* stage = plan.add_stage();
    *stage->mutable_placement() = units.stages[s];
    const std::vector<int>* previous = nullptr;
    for (const ScheduleUnit& unit : StageOrder(conf.schedule(), stages, s, micro_batches)) {
      auto it = units.ops.find({s, unit.micro_batch, unit.backward});
      PipelineUnit* recorded = stage->add_unit();
      recorded->set_micro_batch(unit.micro_batch);
      recorded->set_backward(unit.backward);
      recorded->set_op_count(it == units.ops.end() ? 0 : static_cast<int64_t>(it->second.size()));
      if (it == units.ops.end()) continue;
      if (previous != nullptr) added += ChainUnits(*previous, it->second, edges, job);
      previous = &it->second;
    }
  }
  plan.set_control_edges(added);
  if (static_cast<int>(TopologicalOps(*job, edges).size()) != job->op_size()) {
    return FailedPreconditionError(
        "pipeline schedule ", PipelineScheduleName(conf.schedule()), " over ", stages,
        " stage(s) and ", micro_batches,
        " micro-batches makes a unit wait for itself: the stages are not a chain (a placement "
        "runs forward ops both before and after another one); use the gpipe schedule, or one "
        "placement per contiguous group of layers");
  }
  return plan;
}

}  // namespace compiler
}  // namespace oflite
