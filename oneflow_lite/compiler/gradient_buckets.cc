#include "oneflow_lite/compiler/gradient_buckets.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "oneflow_lite/common/partition.h"

namespace oflite {
namespace compiler {
namespace {

bool IsPartialToBroadcast(const BoxingConf& boxing) {
  return boxing.kind() == BOXING_ALL_REDUCE && boxing.in_sbp().sbp_size() == 1 &&
         boxing.in_sbp().sbp(0).has_partial_sum() && boxing.out_sbp().sbp_size() == 1 &&
         boxing.out_sbp().sbp(0).has_broadcast();
}

// A P -> S(a) reduce-scatter or an S(a) -> B all-gather on a flat ring: a
// bucket runs it as part of its all-reduce (the member cut to this rank's
// range, or its part placed among identity elements: CollectiveMember).
bool IsShardConversion(const BoxingConf& boxing) {
  if (boxing.hierarchy().dim_size() > 0 || boxing.in_sbp().sbp_size() != 1 ||
      boxing.out_sbp().sbp_size() != 1) {
    return false;
  }
  const SbpParallel& in = boxing.in_sbp().sbp(0);
  const SbpParallel& out = boxing.out_sbp().sbp(0);
  return (boxing.kind() == BOXING_REDUCE_SCATTER && in.has_partial_sum() &&
          out.has_split_axis()) ||
         (boxing.kind() == BOXING_ALL_GATHER && in.has_split_axis() && out.has_broadcast());
}

bool Contains(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// Task -> the tasks that wait for it: a register's producer precedes its
// consumers, and its readers precede its mutators.
std::vector<std::vector<int>> Successors(const TaskGraph& g) {
  std::vector<std::vector<int>> next(g.tasks.size());
  for (const RegstNode& r : g.regsts) {
    for (int c : r.consumers) next[r.producer].push_back(c);
    for (int m : r.mutators) {
      for (int c : r.consumers) {
        if (!Contains(r.mutators, c)) next[c].push_back(m);
      }
    }
  }
  return next;
}

// Longest path (in edges) from a task without predecessors to each task.
StatusOr<std::vector<int64_t>> Levels(const std::vector<std::vector<int>>& next) {
  std::vector<int> waiting(next.size(), 0);
  for (const auto& successors : next) {
    for (int s : successors) ++waiting[s];
  }
  std::vector<int> ready;
  for (size_t t = 0; t < next.size(); ++t) {
    if (waiting[t] == 0) ready.push_back(static_cast<int>(t));
  }
  std::vector<int64_t> level(next.size(), 0);
  size_t done = 0;
  while (!ready.empty()) {
    const int t = ready.back();
    ready.pop_back();
    ++done;
    for (int s : next[t]) {
      level[s] = std::max(level[s], level[t] + 1);
      if (--waiting[s] == 0) ready.push_back(s);
    }
  }
  if (done != next.size()) return InternalError("gradient buckets: the task graph has a cycle");
  return level;
}

// One collective ring of the task graph (every TASK_COLLECTIVE ring, so that
// dependencies through a ring's implicit rank-to-rank coupling are seen).
struct Ring {
  std::vector<int> tasks;  // by ring rank
  bool eligible = false;
  int64_t bytes = 0;
  int64_t order = 0;  // backward order: level of its parts' producers
  std::string key;    // devices and dtype: only equal keys share a bucket
  int group = 0;      // index into Bucketer::groups_
};

class Bucketer {
 public:
  Bucketer(TaskGraph* g, int64_t max_bytes, int64_t machine_count)
      : g_(g), max_bytes_(max_bytes), machine_count_(machine_count) {}

  StatusOr<BucketStats> Run() {
    next_ = Successors(*g_);
    StatusOr<std::vector<int64_t>> levels = Levels(next_);
    // No backward order to follow (the reader -> mutator edges close a
    // cycle): fusing is an optimization, so the graph stays as it is.
    if (!levels.ok()) return BucketStats{};
    FindRings(*levels);
    FormBuckets();
    BucketStats stats;
    dead_.assign(g_->tasks.size(), false);
    for (const std::vector<int>& group : groups_) {
      if (group.size() < 2) continue;
      Rewrite(group, stats.buckets++);
      stats.members += static_cast<int>(group.size());
    }
    if (stats.buckets > 0) Compact();
    return stats;
  }

 private:
  void FindRings(const std::vector<int64_t>& levels) {
    ring_of_task_.assign(g_->tasks.size(), -1);
    for (const TaskNode& t : g_->tasks) {
      if (t.type != TASK_COLLECTIVE || t.ring_tasks.empty() || t.ring_tasks[0] != t.index) {
        continue;
      }
      Ring ring;
      ring.tasks = t.ring_tasks;
      ring.group = static_cast<int>(groups_.size());
      for (int task : ring.tasks) ring_of_task_[task] = static_cast<int>(rings_.size());
      ring.eligible = Eligible(ring);
      if (ring.eligible) Describe(levels, &ring);
      groups_.push_back({static_cast<int>(rings_.size())});
      rings_.push_back(std::move(ring));
    }
  }

  bool EligibleTask(const TaskNode& t, const Ring& ring) const {
    if ((!IsPartialToBroadcast(t.boxing) && !IsShardConversion(t.boxing)) ||
        t.ring_tasks != ring.tasks || t.consumed.size() != 1 ||
        t.consumed[0].second.size() != 1 || t.boxing.in_regst_desc_id_size() != 1 ||
        t.produced.size() != 1 || !t.bucket.empty()) {
      return false;
    }
    const RegstNode& out = g_->regsts[t.produced[0]];
    const RegstNode& in = g_->regsts[t.boxing.in_regst_desc_id(0)];
    // All-gathers of sharded parameters only (ZeRO: the part is a variable's
    // register); an activation's or a loss's gather stays its own, so the
    // forward and the metrics never wait for a bucket.
    if (t.boxing.kind() == BOXING_ALL_GATHER && g_->tasks[in.producer].type != TASK_VARIABLE) {
      return false;
    }
    return !out.is_ctrl && !out.is_dynamic && out.blobs.size() == 1 && !in.is_dynamic &&
           in.blobs.size() == 1;
  }

  // A ring over distinct machines: every machine of the cluster, or a group
  // of them (one axis of a hierarchical placement, a pipeline stage's
  // data-parallel ranks), which the communicators run over in ring order.
  bool Eligible(const Ring& ring) const {
    if (ring.tasks.size() < 2) return false;
    std::set<int64_t> machines;
    for (int task : ring.tasks) {
      const TaskNode& t = g_->tasks[task];
      if (t.device.machine < 0 || t.device.machine >= machine_count_ ||
          !machines.insert(t.device.machine).second || !EligibleTask(t, ring)) {
        return false;
      }
    }
    const TensorDesc logical(g_->tasks[ring.tasks[0]].boxing.logical_desc());
    return CanAccumulate(logical.dtype) && !logical.is_dynamic &&
           logical.shape.elem_count() > 0 && logical.ByteSize() <= max_bytes_;
  }

  void Describe(const std::vector<int64_t>& levels, Ring* ring) const {
    const TensorDesc logical(g_->tasks[ring->tasks[0]].boxing.logical_desc());
    ring->bytes = logical.ByteSize();
    // Flat and sub-group rings apart: a bucket takes its first ring's n-D
    // fields, and shard members need a flat one.
    const bool flat = g_->tasks[ring->tasks[0]].boxing.hierarchy().dim_size() == 0;
    ring->key = std::to_string(static_cast<int>(logical.dtype)) + (flat ? "|flat" : "|nd");
    for (int task : ring->tasks) {
      const TaskNode& t = g_->tasks[task];
      ring->key += "|" + t.device.ToString();
      const int producer = g_->regsts[t.boxing.in_regst_desc_id(0)].producer;
      ring->order = std::max(ring->order, levels[producer]);
    }
  }

  // Whether a task of group `to` waits (transitively) for group `from`. A
  // ring's (or bucket's) tasks act together, so reaching one reaches all.
  bool Reaches(int from, int to) const {
    std::vector<bool> seen(g_->tasks.size(), false);
    std::vector<int> stack;
    auto visit_group = [&](int group) {
      for (int ring : groups_[group]) {
        for (int task : rings_[ring].tasks) {
          if (!seen[task]) {
            seen[task] = true;
            stack.push_back(task);
          }
        }
      }
    };
    visit_group(from);
    while (!stack.empty()) {
      const int task = stack.back();
      stack.pop_back();
      for (int s : next_[task]) {
        if (seen[s]) continue;
        const int ring = ring_of_task_[s];
        if (ring < 0) {
          seen[s] = true;
          stack.push_back(s);
        } else if (rings_[ring].group == to) {
          return true;
        } else {
          visit_group(rings_[ring].group);
        }
      }
    }
    return false;
  }

  // Whether ring `ring` reads a register that a ring of `group` reads too: a
  // fused task lists each input once, so such rings stay apart (the lowering
  // shares a conversion's prefix, so two reductions of one register are
  // not expected; this keeps the plan valid if one appears).
  bool SharesInput(int ring, int group) const {
    for (int other : groups_[group]) {
      for (size_t rank = 0; rank < rings_[ring].tasks.size(); ++rank) {
        if (g_->tasks[rings_[ring].tasks[rank]].boxing.in_regst_desc_id(0) ==
            g_->tasks[rings_[other].tasks[rank]].boxing.in_regst_desc_id(0)) {
          return true;
        }
      }
    }
    return false;
  }

  void Merge(int ring, int group) {
    const int old = rings_[ring].group;
    groups_[old].clear();
    groups_[group].push_back(ring);
    rings_[ring].group = group;
  }

  // Greedy, per key, in backward order (ties: task creation order). A ring
  // joins the most recently opened bucket it fits and may join, else opens
  // one; up to kOpenBuckets stay open at once, and a full one (no room left)
  // closes. So a gradient that fills a bucket alone (a 64 KiB weight between
  // two 512 B biases) does not close the bucket collecting the small ones:
  // they still share one collective instead of one each.
  static constexpr size_t kOpenBuckets = 2;
  void FormBuckets() {
    std::map<std::string, std::vector<std::tuple<int64_t, int, int>>> by_key;
    for (size_t r = 0; r < rings_.size(); ++r) {
      const Ring& ring = rings_[r];
      if (ring.eligible) by_key[ring.key].emplace_back(ring.order, ring.tasks[0], r);
    }
    for (auto& [key, candidates] : by_key) {
      std::sort(candidates.begin(), candidates.end());
      std::vector<std::pair<int, int64_t>> open;  // (group, bytes), oldest first
      for (const auto& [order, first_task, r] : candidates) {
        const int group = rings_[r].group;
        const int64_t bytes = rings_[r].bytes;
        bool joined = false;
        for (auto it = open.rbegin(); it != open.rend() && !joined; ++it) {
          if (it->second + bytes <= max_bytes_ && !SharesInput(static_cast<int>(r), it->first) &&
              !Reaches(it->first, group) && !Reaches(group, it->first)) {
            Merge(r, it->first);
            it->second += bytes;
            joined = true;
          }
        }
        if (!joined) {
          open.emplace_back(group, bytes);
          if (open.size() > kOpenBuckets) open.erase(open.begin());
        }
        open.erase(std::remove_if(open.begin(), open.end(),
                                  [&](const std::pair<int, int64_t>& b) {
                                    return b.second >= max_bytes_;
                                  }),
                   open.end());
      }
    }
  }

  // Moves ring task `from`'s part and output (member m) to the fused task.
  void MoveInto(int from, int into, size_t m) {
    TaskNode& u = g_->tasks[from];
    TaskNode& t = g_->tasks[into];
    const int in = static_cast<int>(u.boxing.in_regst_desc_id(0));
    std::vector<int>& consumers = g_->regsts[in].consumers;
    std::replace(consumers.begin(), consumers.end(), from, into);
    t.consumed[0].second.push_back(in);
    t.boxing.add_in_regst_desc_id(in);
    t.boxing.add_in_parallel_id(u.boxing.in_parallel_id_size() > 0 ? u.boxing.in_parallel_id(0)
                                                                    : t.boxing.out_parallel_id());
    const int out = u.produced[0];
    g_->regsts[out].producer = into;
    g_->regsts[out].name = "out_" + std::to_string(m);
    t.produced.push_back(out);
    dead_[from] = true;
  }

  // The rings of `members` (backward order) become one ring of fused tasks:
  // the first ring's tasks, which take over the others' registers.
  void Rewrite(std::vector<int> members, int bucket) {
    std::sort(members.begin(), members.end(), [&](int a, int b) {
      return std::make_tuple(rings_[a].order, rings_[a].tasks[0]) <
             std::make_tuple(rings_[b].order, rings_[b].tasks[0]);
    });
    const std::string label = "bucket" + std::to_string(bucket);
    const Ring& first = rings_[members[0]];
    for (size_t rank = 0; rank < first.tasks.size(); ++rank) {
      const int into = first.tasks[rank];
      std::vector<CollectiveMember> bucket_members;
      int64_t offset = 0;
      DataType dtype = DT_INVALID;
      for (size_t m = 0; m < members.size(); ++m) {
        const int from = rings_[members[m]].tasks[rank];
        const TaskNode& u = g_->tasks[from];
        CollectiveMember& member = bucket_members.emplace_back();
        member.set_lbn(u.boxing.lbn());
        *member.mutable_logical_desc() = u.boxing.logical_desc();
        member.set_in_regst_desc_id(u.boxing.in_regst_desc_id(0));
        member.set_out_regst_desc_id(u.produced[0]);
        member.set_element_offset(offset);
        if (IsShardConversion(u.boxing)) {
          *member.mutable_in_sbp() = u.boxing.in_sbp().sbp(0);
          *member.mutable_out_sbp() = u.boxing.out_sbp().sbp(0);
        }
        const TensorDesc logical(u.boxing.logical_desc());
        offset += logical.shape.elem_count();
        dtype = logical.dtype;
        if (m > 0) MoveInto(from, into, m);
      }
      TaskNode& t = g_->tasks[into];
      t.bucket = std::move(bucket_members);
      if (IsShardConversion(t.boxing)) {  // the bucket itself is P -> B
        t.boxing.set_kind(BOXING_ALL_REDUCE);
        t.boxing.mutable_in_sbp()->mutable_sbp(0)->set_partial_sum(true);
        t.boxing.mutable_out_sbp()->mutable_sbp(0)->set_broadcast(true);
      }
      t.boxing.set_lbn(label);
      *t.boxing.mutable_logical_desc() = TensorDesc(Shape{offset}, dtype).ToProto();
      t.name = "collective:all_reduce:" + label + "@" + std::to_string(rank);
    }
  }

  // Drops the fused-away tasks and renumbers the rest (creation order kept).
  void Compact() { RemoveTasks(g_, dead_); }

  TaskGraph* const g_;
  const int64_t max_bytes_;
  const int64_t machine_count_;
  std::vector<std::vector<int>> next_;
  std::vector<int> ring_of_task_;           // task -> ring, -1: none
  std::vector<Ring> rings_;
  std::vector<std::vector<int>> groups_;    // group -> its rings
  std::vector<bool> dead_;                  // tasks fused away
};

}  // namespace

StatusOr<BucketStats> FuseAllReduceBuckets(TaskGraph* graph, int64_t max_bytes,
                                           int64_t machine_count) {
  if (max_bytes <= 0) return BucketStats{};
  Bucketer bucketer(graph, max_bytes, machine_count);
  return bucketer.Run();
}

}  // namespace compiler
}  // namespace oflite
