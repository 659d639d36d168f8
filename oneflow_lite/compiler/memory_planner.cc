#include "oneflow_lite/compiler/memory_planner.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <map>
#include <queue>
#include <set>
#include <tuple>

namespace oflite {
namespace compiler {
namespace {

using ZoneKey = std::tuple<int64_t, int, int, int64_t>;  // machine, type, device type, index

ZoneKey KeyOf(const MemZoneId& z) {
  return {z.machine_id(), z.type(), z.device_type(), z.device_index()};
}

// Descendant sets over a DAG whose nodes are numbered in topological order.
class Reachability {
 public:
  // successors[i]: nodes after i (indices > i).
  explicit Reachability(const std::vector<std::vector<int>>& successors)
      : reach_(successors.size(), std::vector<bool>(successors.size(), false)) {
    for (int i = static_cast<int>(successors.size()) - 1; i >= 0; --i) {
      for (int s : successors[i]) {
        reach_[i][s] = true;
        for (size_t k = 0; k < reach_[s].size(); ++k) {
          if (reach_[s][k]) reach_[i][k] = true;
        }
      }
    }
  }
  bool Reaches(int from, int to) const { return reach_[from][to]; }

 private:
  std::vector<std::vector<bool>> reach_;
};

// Users of a register: its consumers, or its producer when nobody reads it.
std::vector<int> Users(const std::vector<int>& consumers, int producer) {
  return consumers.empty() ? std::vector<int>{producer} : consumers;
}

// Per machine: local task order and reachability, in local positions.
struct MachineOrder {
  std::vector<int> tasks;      // task indices in topological order
  std::map<int, int> position;  // task index -> position
};

StatusOr<MachineOrder> OrderMachine(const TaskGraph& g, int64_t machine) {
  MachineOrder order;
  std::vector<int> local;
  for (const TaskNode& t : g.tasks) {
    if (t.device.machine == machine) local.push_back(t.index);
  }
  std::map<int, int> slot;
  for (size_t i = 0; i < local.size(); ++i) slot[local[i]] = static_cast<int>(i);
  std::vector<std::set<int>> succ(local.size());
  std::vector<int> in_degree(local.size(), 0);
  for (const RegstNode& r : g.regsts) {
    auto p = slot.find(r.producer);
    if (p == slot.end()) continue;
    for (int c : r.consumers) {
      auto q = slot.find(c);
      if (q != slot.end() && succ[p->second].insert(q->second).second) ++in_degree[q->second];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < local.size(); ++i) {
    if (in_degree[i] == 0) ready.push(static_cast<int>(i));
  }
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.position[local[i]] = static_cast<int>(order.tasks.size());
    order.tasks.push_back(local[i]);
    for (int s : succ[i]) {
      if (--in_degree[s] == 0) ready.push(s);
    }
  }
  if (order.tasks.size() != local.size()) {
    return InternalError("task graph of machine ", machine, " has a cycle");
  }
  return order;
}

Reachability BuildReachability(const TaskGraph& g, const MachineOrder& order) {
  std::vector<std::vector<int>> succ(order.tasks.size());
  for (const RegstNode& r : g.regsts) {
    auto p = order.position.find(r.producer);
    if (p == order.position.end()) continue;
    for (int c : r.consumers) {
      auto q = order.position.find(c);
      if (q != order.position.end()) succ[p->second].push_back(q->second);
    }
  }
  return Reachability(succ);
}

class ZonePlanner {
 public:
  ZonePlanner(TaskGraph* g, const MachineOrder& order, const Reachability& reach)
      : g_(g), order_(order), reach_(reach) {}

  bool Reusable(const RegstNode& r) const {
    if (r.regst_num != 1 || r.is_persistent || r.is_ctrl || r.bytes_per_regst == 0 ||
        r.cross_machine_strategy != CM_NONE) {
      return false;
    }
    for (int c : r.consumers) {
      if (!order_.position.count(c)) return false;
    }
    return true;
  }

  // Every user of `before` strictly precedes `after`'s producer.
  bool HappensBefore(const RegstNode& before, const RegstNode& after) const {
    int producer = order_.position.at(after.producer);
    for (int u : Users(before.consumers, before.producer)) {
      int pos = order_.position.at(u);
      if (pos == producer || !reach_.Reaches(pos, producer)) return false;
    }
    return true;
  }

  // Lays out `regsts` (ids) from `base`; returns the end offset.
  int64_t PlaceExclusive(const std::vector<int>& ids, int64_t base) {
    for (int id : ids) {
      RegstNode& r = g_->regsts[id];
      r.mem_offset.clear();
      for (int k = 0; k < r.regst_num; ++k) r.mem_offset.push_back(base + k * r.bytes_per_regst);
      base += r.regst_num * r.bytes_per_regst;
    }
    return base;
  }

  // First-fit with reuse among `ids` (one device's reusable registers).
  int64_t PlaceShared(std::vector<int> ids, int64_t base) {
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      return std::make_pair(g_->regsts[a].lifetime_begin, a) <
             std::make_pair(g_->regsts[b].lifetime_begin, b);
    });
    std::vector<int> placed;
    int64_t end = base;
    for (int id : ids) {
      RegstNode& r = g_->regsts[id];
      std::vector<int64_t> candidates{base};
      for (int p : placed) candidates.push_back(g_->regsts[p].mem_offset[0] + g_->regsts[p].bytes_per_regst);
      std::sort(candidates.begin(), candidates.end());
      for (int64_t offset : candidates) {
        if (Fits(r, offset, placed)) {
          r.mem_offset = {offset};
          break;
        }
      }
      for (int p : placed) {
        if (Overlaps(g_->regsts[p], r)) pairs_.emplace_back(p, id);
      }
      placed.push_back(id);
      end = std::max(end, r.mem_offset[0] + r.bytes_per_regst);
    }
    return end;
  }

  const std::vector<std::pair<int, int>>& pairs() const { return pairs_; }

 private:
  static bool RangesOverlap(int64_t a, int64_t a_size, int64_t b, int64_t b_size) {
    return a < b + b_size && b < a + a_size;
  }
  bool Overlaps(const RegstNode& a, const RegstNode& b) const {
    return RangesOverlap(a.mem_offset[0], a.bytes_per_regst, b.mem_offset[0], b.bytes_per_regst);
  }
  bool Fits(const RegstNode& r, int64_t offset, const std::vector<int>& placed) const {
    for (int p : placed) {
      const RegstNode& other = g_->regsts[p];
      if (RangesOverlap(offset, r.bytes_per_regst, other.mem_offset[0], other.bytes_per_regst) &&
          !HappensBefore(other, r)) {
        return false;
      }
    }
    return true;
  }

  TaskGraph* g_;
  const MachineOrder& order_;
  const Reachability& reach_;
  std::vector<std::pair<int, int>> pairs_;  // (earlier, later) sharing bytes
};

void SetLifetimes(TaskGraph* g, const MachineOrder& order) {
  const int64_t last = static_cast<int64_t>(order.tasks.size()) - 1;
  for (int task : order.tasks) g->tasks[task].topo_order = order.position.at(task);
  for (RegstNode& r : g->regsts) {
    auto p = order.position.find(r.producer);
    if (p == order.position.end()) continue;
    r.lifetime_begin = p->second;
    r.lifetime_end = p->second;
    for (int c : r.consumers) {
      auto q = order.position.find(c);
      r.lifetime_end = q == order.position.end() ? last : std::max<int64_t>(r.lifetime_end, q->second);
    }
    if (r.is_persistent) {
      r.lifetime_begin = 0;
      r.lifetime_end = last;
    }
  }
}

// The local tasks whose return of a register of `producer` holds its next
// iteration back: the consumers (on this machine) of its registers with
// regst_num 1. An actor acts only when it holds a free copy of every
// register it produces, and a copy is free again once every consumer has
// returned it.
std::vector<int> HoldingConsumers(const TaskGraph& g, const MachineOrder& order, int producer) {
  std::vector<int> holding;
  for (int id : g.tasks[producer].produced) {
    const RegstNode& r = g.regsts[id];
    if (r.regst_num != 1) continue;
    for (int c : r.consumers) {
      if (order.position.count(c)) holding.push_back(c);
    }
  }
  return holding;
}

// Adds "ctrl_mem" registers so that `earlier`'s producer waits for every user
// of `later` before its next iteration. A user U needs no edge of its own
// when the producer is already held back by a task that U reaches within an
// iteration (or by U itself): that task's act of iteration k follows U's act
// of iteration k (every actor acts once per iteration and each edge joins
// acts of the same iteration), and the producer's next act follows that
// task's return. So each producer's edges go to the users it is not yet
// held back by, less those that reach another of them (docs/compiler.md,
// "Memory plan", has what that saves).
void AddReuseControls(TaskGraph* g, const MachineOrder& order, const Reachability& reach,
                      const std::vector<std::pair<int, int>>& pairs) {
  // Per producer, in the order the pairs name them: its users to wait for.
  std::vector<int> producers;
  std::map<int, std::vector<int>> users_of;
  for (const auto& [earlier, later] : pairs) {
    const int producer = g->regsts[earlier].producer;
    g->regsts[earlier].memory_reused = true;
    g->regsts[later].memory_reused = true;
    auto [it, added] = users_of.try_emplace(producer);
    if (added) producers.push_back(producer);
    for (int user : Users(g->regsts[later].consumers, g->regsts[later].producer)) {
      std::vector<int>& users = it->second;
      if (user != producer && std::find(users.begin(), users.end(), user) == users.end()) {
        users.push_back(user);
      }
    }
  }
  auto reaches = [&](int from, int to) {
    return from == to || reach.Reaches(order.position.at(from), order.position.at(to));
  };
  for (int producer : producers) {
    const std::vector<int> holding = HoldingConsumers(*g, order, producer);
    std::vector<int> open;
    for (int user : users_of[producer]) {
      if (std::none_of(holding.begin(), holding.end(), [&](int h) { return reaches(user, h); })) {
        open.push_back(user);
      }
    }
    std::vector<int> kept;
    for (int user : open) {
      if (std::none_of(open.begin(), open.end(),
                       [&](int other) { return other != user && reaches(user, other); })) {
        kept.push_back(user);
      }
    }
    if (kept.empty()) continue;
    RegstNode r;
    r.id = static_cast<int>(g->regsts.size());
    r.name = "ctrl_mem";
    r.producer = producer;
    // Control registers hold no bytes; they sit in their machine's host zone.
    r.zone.set_machine_id(g->tasks[producer].device.machine);
    r.zone.set_type(ZONE_HOST);
    r.zone.set_device_type(DEVICE_CPU);
    r.zone.set_device_index(0);
    r.is_ctrl = true;
    r.lifetime_begin = g->tasks[producer].topo_order;
    r.lifetime_end = r.lifetime_begin;
    r.mem_offset = {0};
    for (int user : kept) {
      r.consumers.push_back(user);
      r.lifetime_end = std::max(r.lifetime_end, g->tasks[user].topo_order);
      auto& consumed = g->tasks[user].consumed;
      auto slot = std::find_if(consumed.begin(), consumed.end(),
                               [](const auto& c) { return c.first == "ctrl_mem"; });
      if (slot == consumed.end()) {
        consumed.emplace_back("ctrl_mem", std::vector<int>{r.id});
      } else {
        slot->second.push_back(r.id);
      }
    }
    g->tasks[producer].produced.push_back(r.id);
    g->regsts.push_back(std::move(r));
  }
}

}  // namespace

StatusOr<std::vector<MemBlockProto>> PlanMemory(TaskGraph* g, const MemoryPlanOptions& options) {
  std::set<int64_t> machines;
  for (const TaskNode& t : g->tasks) machines.insert(t.device.machine);
  std::vector<MemBlockProto> blocks;
  for (int64_t machine : machines) {
    ASSIGN_OR_RETURN(MachineOrder order, OrderMachine(*g, machine));
    SetLifetimes(g, order);
    Reachability reach = BuildReachability(*g, order);
    ZonePlanner planner(g, order, reach);
    // zone -> (exclusive ids, device -> shared ids)
    std::map<ZoneKey, std::pair<std::vector<int>, std::map<DeviceRef, std::vector<int>>>> zones;
    std::map<ZoneKey, MemZoneId> zone_ids;
    const size_t regst_count = g->regsts.size();
    for (size_t id = 0; id < regst_count; ++id) {
      const RegstNode& r = g->regsts[id];
      if (g->tasks[r.producer].device.machine != machine) continue;
      ZoneKey key = KeyOf(r.zone);
      zone_ids[key] = r.zone;
      auto& entry = zones[key];
      if (options.enable_reuse && planner.Reusable(r)) {
        entry.second[g->tasks[r.producer].device].push_back(static_cast<int>(id));
      } else {
        entry.first.push_back(static_cast<int>(id));
      }
    }
    for (auto& [key, entry] : zones) {
      int64_t end = planner.PlaceExclusive(entry.first, 0);
      for (auto& [device, ids] : entry.second) end = planner.PlaceShared(ids, end);
      MemBlockProto block;
      *block.mutable_zone() = zone_ids[key];
      block.set_size(end);
      int64_t without = 0;
      int64_t count = static_cast<int64_t>(entry.first.size());
      for (int id : entry.first) without += g->regsts[id].regst_num * g->regsts[id].bytes_per_regst;
      for (auto& [device, ids] : entry.second) {
        count += static_cast<int64_t>(ids.size());
        for (int id : ids) without += g->regsts[id].bytes_per_regst;
      }
      block.set_bytes_without_reuse(without);
      block.set_regst_count(count);
      blocks.push_back(block);
    }
    AddReuseControls(g, order, reach, planner.pairs());
  }
  return blocks;
}

namespace {

std::string DescribeRegst(const RegstDescProto& r, const std::map<int64_t, const TaskProto*>& tasks) {
  std::string what = r.blob_size() > 0 ? r.blob(0).lbn() : r.name();
  auto it = tasks.find(r.producer_task_id());
  std::string producer = it == tasks.end() ? "?" : it->second->name();
  return "register " + std::to_string(r.regst_desc_id()) + " (" + what + ", produced by '" +
         producer + "')";
}

struct CheckedRegst {
  const RegstDescProto* regst;
  int producer_position;
};

class MachineChecker {
 public:
  explicit MachineChecker(const MachinePlan& machine) : machine_(machine) {}

  Status Run() {
    RETURN_IF_ERROR(IndexTasks());
    RETURN_IF_ERROR(CheckBlocks());
    for (auto& [zone, regsts] : by_zone_) {
      for (size_t a = 0; a < regsts.size(); ++a) {
        for (size_t b = a + 1; b < regsts.size(); ++b) {
          RETURN_IF_ERROR(CheckPair(*regsts[a], *regsts[b]));
        }
      }
    }
    return Status::OK();
  }

 private:
  Status IndexTasks() {
    const int n = machine_.task_size();
    std::vector<bool> seen(n, false);
    for (const TaskProto& t : machine_.task()) {
      if (t.topo_order() < 0 || t.topo_order() >= n || seen[t.topo_order()]) {
        return InternalError("machine ", machine_.machine_id(), ": task '", t.name(),
                             "' has an invalid or duplicate topo_order ", t.topo_order());
      }
      seen[t.topo_order()] = true;
      tasks_[t.task_id()] = &t;
      for (const RegstDescProto& r : t.produced()) {
        regsts_[r.regst_desc_id()] = &r;
        if (r.bytes_per_regst() > 0) by_zone_[KeyOf(r.zone())].push_back(&r);
      }
    }
    std::vector<std::vector<int>> succ(n);
    for (const auto& [id, r] : regsts_) {
      int p = Position(r->producer_task_id());
      for (int64_t c : r->consumer_task_id()) {
        int q = Position(c);
        if (q < 0) continue;  // a remote consumer
        if (q <= p) {
          return InternalError("machine ", machine_.machine_id(), ": ",
                               DescribeRegst(*r, tasks_), " is consumed before it is produced "
                               "in the topological order");
        }
        succ[p].push_back(q);
      }
    }
    reach_ = std::make_unique<Reachability>(succ);
    return Status::OK();
  }

  int Position(int64_t task_id) const {
    auto it = tasks_.find(task_id);
    return it == tasks_.end() ? -1 : static_cast<int>(it->second->topo_order());
  }

  Status CheckBlocks() {
    std::map<ZoneKey, int64_t> sizes;
    for (const MemBlockProto& b : machine_.mem_block()) sizes[KeyOf(b.zone())] = b.size();
    for (auto& [zone, regsts] : by_zone_) {
      auto it = sizes.find(zone);
      for (const RegstDescProto* r : regsts) {
        if (it == sizes.end()) {
          return InternalError("machine ", machine_.machine_id(), ": ", DescribeRegst(*r, tasks_),
                               " is in a zone without a memory block");
        }
        if (r->mem_offset_size() != r->regst_num()) {
          return InternalError(DescribeRegst(*r, tasks_), " has ", r->mem_offset_size(),
                               " offsets for regst_num ", r->regst_num());
        }
        for (int64_t offset : r->mem_offset()) {
          if (offset < 0 || offset + r->bytes_per_regst() > it->second) {
            return InternalError(DescribeRegst(*r, tasks_), " copy at offset ", offset,
                                 " runs past its block of ", it->second, " bytes");
          }
        }
      }
    }
    return Status::OK();
  }

  static bool Overlap(const RegstDescProto& a, const RegstDescProto& b) {
    for (int64_t x : a.mem_offset()) {
      for (int64_t y : b.mem_offset()) {
        if (x < y + b.bytes_per_regst() && y < x + a.bytes_per_regst()) return true;
      }
    }
    return false;
  }

  std::vector<int64_t> Users(const RegstDescProto& r) const {
    if (r.consumer_task_id_size() == 0) return {r.producer_task_id()};
    return {r.consumer_task_id().begin(), r.consumer_task_id().end()};
  }

  Status CheckPair(const RegstDescProto& x, const RegstDescProto& y) {
    if (!Overlap(x, y)) return Status::OK();
    auto fail = [&](const std::string& why) {
      return InternalError("memory plan of machine ", machine_.machine_id(), ": ",
                           DescribeRegst(x, tasks_), " and ", DescribeRegst(y, tasks_),
                           " share bytes but ", why);
    };
    for (const RegstDescProto* r : {&x, &y}) {
      if (r->regst_num() != 1 || r->is_persistent() ||
          r->cross_machine_strategy() != CM_NONE) {
        return fail(DescribeRegst(*r, tasks_) + " is persistent, cross-machine or has "
                    "several copies");
      }
    }
    const RegstDescProto& earlier = x.lifetime_begin() <= y.lifetime_begin() ? x : y;
    const RegstDescProto& later = &earlier == &x ? y : x;
    if (earlier.lifetime_end() >= later.lifetime_begin()) return fail("their lifetimes overlap");
    const int later_producer = Position(later.producer_task_id());
    for (int64_t user : Users(earlier)) {
      int pos = Position(user);
      if (pos < 0) return fail("a user is on another machine");
      if (pos == later_producer || !reach_->Reaches(pos, later_producer)) {
        return fail("task '" + tasks_.at(user)->name() +
                    "' does not finish before the later register is produced");
      }
    }
    // The earlier producer's next act waits for every consumer of its
    // registers with regst_num 1; a user of the later register is done
    // with iteration k once such a consumer, or one it reaches, is.
    const TaskProto& first_producer = *tasks_.at(earlier.producer_task_id());
    for (int64_t user : Users(later)) {
      if (user == first_producer.task_id()) continue;
      const int user_pos = Position(user);
      bool held = false;
      for (const RegstDescProto& r : first_producer.produced()) {
        if (r.regst_num() != 1) continue;
        for (int64_t c : r.consumer_task_id()) {
          const int pos = Position(c);
          held = held || c == user || (user_pos >= 0 && pos >= 0 && reach_->Reaches(user_pos, pos));
        }
      }
      if (!held) {
        return fail("no register with regst_num 1 from '" + first_producer.name() +
                    "' to '" + tasks_.at(user)->name() +
                    "' or to a task it reaches holds the next iteration back");
      }
    }
    return Status::OK();
  }

  const MachinePlan& machine_;
  std::map<int64_t, const TaskProto*> tasks_;
  std::map<int64_t, const RegstDescProto*> regsts_;
  std::map<ZoneKey, std::vector<const RegstDescProto*>> by_zone_;
  std::unique_ptr<Reachability> reach_;
};

}  // namespace

Status CheckMemoryPlan(const Plan& plan) {
  for (const MachinePlan& machine : plan.machine()) {
    MachineChecker checker(machine);
    RETURN_IF_ERROR(checker.Run());
  }
  return Status::OK();
}

}  // namespace compiler
}  // namespace oflite
