#include "oneflow_lite/compiler/graph_merge.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <vector>

#include "oneflow_lite/ops/graph_capture.h"

namespace oflite {
namespace compiler {
namespace {

bool Contains(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// Task -> the tasks that wait for it, sorted: a register's producer precedes
// its consumers, and a register's readers precede its mutators (the variable
// protocol hands the register to the mutators only after every reader
// returned it).
std::vector<std::set<int>> Successors(const TaskGraph& g) {
  std::vector<std::set<int>> next(g.tasks.size());
  for (const RegstNode& r : g.regsts) {
    for (int c : r.consumers) {
      if (c != r.producer) next[r.producer].insert(c);
    }
    for (int m : r.mutators) {
      for (int c : r.consumers) {
        if (!Contains(r.mutators, c)) next[c].insert(m);
      }
    }
  }
  return next;
}

// "cuda:0": devices of a graph-capturable plan are on its one machine.
std::string DeviceLabel(const DeviceRef& device) {
  return std::string(device.type == DEVICE_CUDA ? "cuda:" : "cpu:") + std::to_string(device.index);
}

std::string ParallelText(const TaskNode& t) {
  return std::to_string(t.parallel_id) + " of " + std::to_string(t.parallel_num);
}

// The compute tasks of one GPU's compute stream that no merge took yet,
// grouped by level (see GroupsByLevel): each level is a convex set.
std::vector<bool> UnmergedComputeTasks(const TaskGraph& g, const DeviceRef& device) {
  std::vector<bool> in_s(g.tasks.size(), false);
  for (const TaskNode& t : g.tasks) {
    in_s[t.index] = t.type == TASK_COMPUTE && t.device == device &&
                    t.stream == kComputeStream && !t.graph_replay;
  }
  return in_s;
}

// Levels of the tasks in S: a task's level is the largest number of times a
// path into it (along `next`) has left S and come back. Levels never
// decrease along a path and grow each time the path re-enters S, so a path
// that leaves the tasks of one level never returns to that level: each
// level is convex, and merging it into one task keeps the graph acyclic.
// Returns the levels' members (task indices, ascending), lowest first.
std::vector<std::vector<int>> GroupsByLevel(const TaskGraph& g,
                                            const std::vector<std::set<int>>& next,
                                            const std::vector<bool>& in_s) {
  const size_t n = g.tasks.size();
  std::vector<int> waiting(n, 0);
  for (size_t t = 0; t < n; ++t) {
    for (int s : next[t]) ++waiting[s];
  }
  std::deque<int> ready;
  for (size_t t = 0; t < n; ++t) {
    if (waiting[t] == 0) ready.push_back(static_cast<int>(t));
  }
  // level: tasks in S; reach: tasks outside S, the highest level of an S
  // task before them (-1: none).
  std::vector<int> level(n, 0), reach(n, -1);
  while (!ready.empty()) {
    const int t = ready.front();
    ready.pop_front();
    for (int s : next[t]) {
      if (in_s[s]) {
        level[s] = std::max(level[s], in_s[t] ? level[t] : (reach[t] >= 0 ? reach[t] + 1 : 0));
      } else {
        reach[s] = std::max(reach[s], in_s[t] ? level[t] : reach[t]);
      }
      if (--waiting[s] == 0) ready.push_back(s);
    }
  }
  std::map<int, std::vector<int>> groups;
  for (size_t t = 0; t < n; ++t) {
    if (in_s[t]) groups[level[t]].push_back(static_cast<int>(t));
  }
  std::vector<std::vector<int>> out;
  for (auto& [l, members] : groups) out.push_back(std::move(members));
  return out;
}

// Merges one convex set S of a GPU's compute tasks into one task.
class DeviceMerger {
 public:
  DeviceMerger(TaskGraph* g, const DeviceRef& device, const std::vector<int>& members,
               std::string name)
      : g_(g), device_(device), s_(members), name_(std::move(name)) {
    in_s_.assign(g->tasks.size(), false);
    for (int t : s_) in_s_[t] = true;
  }

  // Kernels get their task's parallel context at init: one context for
  // all, else why not.
  std::string ParallelMismatch() const {
    const TaskNode& first = g_->tasks[s_[0]];
    for (int i : s_) {
      const TaskNode& t = g_->tasks[i];
      if (t.parallel_id != first.parallel_id || t.parallel_num != first.parallel_num) {
        return "tasks '" + first.name + "' (parallel " + ParallelText(first) + ") and '" + t.name +
               "' (parallel " + ParallelText(t) + ") have different parallel contexts";
      }
    }
    return "";
  }

  // Rewrites the graph; returns the merged task's kernel count. `next`:
  // Successors() of the graph as it is.
  StatusOr<int> Merge(const std::vector<std::set<int>>& next) {
    ASSIGN_OR_RETURN(std::vector<int> order, KernelOrder(next));
    return Rewrite(order);
  }

 private:
  // S in a topological order of `next` restricted to S (producer before
  // consumer, each S reader of a register before the S task mutating it in
  // place); ties by task index.
  StatusOr<std::vector<int>> KernelOrder(const std::vector<std::set<int>>& next) const {
    std::map<int, int> waiting;
    for (int t : s_) waiting[t] = 0;
    for (int t : s_) {
      for (int s : next[t]) {
        if (in_s_[s]) ++waiting[s];
      }
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (const auto& [t, count] : waiting) {
      if (count == 0) ready.push(t);
    }
    std::vector<int> order;
    while (!ready.empty()) {
      const int t = ready.top();
      ready.pop();
      order.push_back(t);
      for (int s : next[t]) {
        if (in_s_[s] && --waiting[s] == 0) ready.push(s);
      }
    }
    if (order.size() != s_.size()) {
      for (const auto& [t, count] : waiting) {
        if (count > 0) {
          return InternalError("compute tasks of ", device_.ToString(), ": no kernel order, task '",
                               g_->tasks[t].name, "' is on a cycle of register and in-place edges");
        }
      }
    }
    return order;
  }

  // S tasks in `*tasks` are replaced by `merged` once, where the first was.
  void ReplaceOnce(std::vector<int>* tasks, int merged) const {
    std::vector<int> out;
    bool placed = false;
    for (int t : *tasks) {
      if (!in_s_[t]) {
        out.push_back(t);
      } else if (!placed) {
        out.push_back(merged);
        placed = true;
      }
    }
    *tasks = std::move(out);
  }

  void DropS(std::vector<int>* tasks) const {
    tasks->erase(std::remove_if(tasks->begin(), tasks->end(), [&](int t) { return in_s_[t]; }),
                 tasks->end());
  }

  TaskNode MergedTask(const std::vector<int>& order, int index) const {
    const TaskNode& head = g_->tasks[index];
    TaskNode merged;
    merged.index = index;
    merged.type = TASK_COMPUTE;
    merged.name = name_;
    merged.device = device_;
    merged.stream = kComputeStream;
    merged.parallel_id = head.parallel_id;
    merged.parallel_num = head.parallel_num;
    merged.graph_replay = true;
    std::set<int> seen;
    std::vector<int> controls;
    for (int t : order) {
      const TaskNode& task = g_->tasks[t];
      for (const KernelConf& k : task.kernels) merged.kernels.push_back(k);
      for (int r : task.produced) merged.produced.push_back(r);
      for (const auto& [name, ids] : task.consumed) {
        for (int id : ids) {
          if (in_s_[g_->regsts[id].producer] || !seen.insert(id).second) continue;
          if (g_->regsts[id].is_ctrl) {
            controls.push_back(id);
          } else {
            merged.consumed.emplace_back("in_" + std::to_string(merged.consumed.size()),
                                         std::vector<int>{id});
          }
        }
      }
    }
    if (!controls.empty()) merged.consumed.emplace_back("ctrl", controls);
    merged.op_name = merged.kernels.empty() ? head.op_name : merged.kernels[0].op().name();
    return merged;
  }

  // Replaces S by one task in the first S task's place; returns its kernel
  // count.
  int Rewrite(const std::vector<int>& order) {
    const int index = s_[0];
    TaskNode merged = MergedTask(order, index);
    for (RegstNode& r : g_->regsts) {
      if (in_s_[r.producer]) {
        r.producer = index;
        DropS(&r.consumers);
        DropS(&r.mutators);
        if (r.consumers.empty()) r.regst_num = 1;  // inner: read only inside the act
      } else {
        ReplaceOnce(&r.consumers, index);
        ReplaceOnce(&r.mutators, index);
      }
    }
    const int ops = static_cast<int>(merged.kernels.size());
    g_->tasks[index] = std::move(merged);
    std::vector<bool> removed = in_s_;
    removed[index] = false;
    RemoveTasks(g_, removed);
    return ops;
  }

  TaskGraph* const g_;
  const DeviceRef device_;
  const std::vector<int> s_;  // the tasks to merge, by index
  const std::string name_;    // the merged task's
  std::vector<bool> in_s_;    // task -> in s_
};

// Merges the convex groups of one GPU's compute tasks, lowest level first
// (indices change with every merge, so the groups are recomputed); returns
// the device's note entry.
StatusOr<std::string> MergeDevice(TaskGraph* g, const DeviceRef& device) {
  std::vector<int> ops;
  std::string why_not;
  int left = 0;  // compute tasks left on the stream
  for (;;) {
    const std::vector<bool> in_s = UnmergedComputeTasks(*g, device);
    const std::vector<std::set<int>> next = Successors(*g);
    const std::vector<std::vector<int>> groups = GroupsByLevel(*g, next, in_s);
    bool progressed = false;
    left = 0;
    for (const std::vector<int>& group : groups) {
      left += static_cast<int>(group.size());
      if (progressed || group.size() < 2) continue;
      const std::string name = "compute-graph" +
                               (ops.empty() ? std::string() : "-" + std::to_string(ops.size())) +
                               "@" + device.ToString();
      DeviceMerger merger(g, device, group, name);
      const std::string mismatch = merger.ParallelMismatch();
      if (!mismatch.empty()) {
        if (why_not.empty()) why_not = mismatch;
        continue;
      }
      ASSIGN_OR_RETURN(int kernels, merger.Merge(next));
      ops.push_back(kernels);
      progressed = true;
    }
    if (!progressed) break;
  }
  const std::string label = DeviceLabel(device);
  if (ops.empty()) {
    if (why_not.empty()) {
      why_not = left < 2 ? std::to_string(left) + " compute task (nothing to merge)"
                         : "each compute task is cut off from the others by work on other "
                           "streams (no convex group of two)";
    }
    return label + ": stream-ordered, " + why_not;
  }
  std::string text = label + ": ";
  if (ops.size() == 1) {
    text += "one captured task, " + std::to_string(ops[0]) + " ops";
  } else {
    text += std::to_string(ops.size()) + " captured tasks, ";
    for (size_t k = 0; k < ops.size(); ++k) text += (k ? " + " : "") + std::to_string(ops[k]);
    text += " ops";
  }
  if (left > 0) text += " (" + std::to_string(left) + " more stream-ordered)";
  if (!why_not.empty()) text += " (" + why_not + ")";
  return text;
}

}  // namespace

std::string GraphCaptureBlocker(const TaskGraph& graph, const ClusterProto& cluster) {
  std::string why_not;
  int cuda_tasks = 0;
  for (const TaskNode& t : graph.tasks) {
    if (t.device.type != DEVICE_CUDA) continue;
    ++cuda_tasks;
    if (t.type != TASK_COMPUTE && t.type != TASK_VARIABLE && t.type != TASK_COPY_H2D &&
        t.type != TASK_COPY_D2H && why_not.empty()) {
      why_not =
          "task '" + t.name + "' (" + TaskType_Name(t.type) + ") runs host code on a CUDA stream";
    }
    for (const KernelConf& k : t.kernels) {
      if (why_not.empty() && LaunchArgumentsFollowTheIteration(k.op())) {
        why_not = "op '" + k.op().name() + "' (" + k.op().op_type() +
                  ") computes a launch argument from the iteration on the host";
      }
    }
  }
  for (const RegstNode& r : graph.regsts) {
    if (r.is_dynamic && why_not.empty()) why_not = "register '" + r.name + "' is dynamic";
  }
  if (cluster.machine_size() != 1) why_not = "the plan spans several machines";
  if (cuda_tasks == 0) why_not = "no CUDA task";
  return why_not;
}

StatusOr<GraphMergeResult> MergeGpuComputeTasks(TaskGraph* graph) {
  std::set<DeviceRef> devices;
  for (const TaskNode& t : graph->tasks) {
    if (t.type == TASK_COMPUTE && t.device.type == DEVICE_CUDA && t.stream == kComputeStream) {
      devices.insert(t.device);
    }
  }
  GraphMergeResult result;
  for (const DeviceRef& device : devices) {
    ASSIGN_OR_RETURN(std::string entry, MergeDevice(graph, device));
    result.note += (result.note.empty() ? "" : "; ") + entry;
  }
  return result;
}

}  // namespace compiler
}  // namespace oflite
