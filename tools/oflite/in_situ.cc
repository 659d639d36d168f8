#include "tools/oflite/in_situ.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "oneflow_lite/cost/kernel_key.h"

namespace oflite {
namespace cli {
namespace {

// Times in a trace file are written to the nanosecond (three decimals of a
// microsecond): a kernel that starts as its act starts may round to just
// before it.
constexpr double kRoundingUs = 0.002;

const MachineProto& MachineOf(const Plan& plan, int64_t machine_id) {
  for (const MachineProto& machine : plan.cluster().machine()) {
    if (machine.id() == machine_id) return machine;
  }
  return MachineProto::default_instance();
}

struct Act {
  const TraceRecord* record;
  const TaskProto* task;  // null: no task of the plan
  int64_t iteration;      // -1: not stated
};

// Whether the kernel profiler keys (and times) the kernel: the same
// selection as profile/kernel_profiler.cc, so that every key measured here
// can also have an isolated time.
bool ProfilerKeys(const TaskProto& task, const KernelConf& conf) {
  return (task.type() == TASK_COMPUTE || task.type() == TASK_SOURCE) &&
         task.device_type() == DEVICE_CPU && conf.op().op_type() != "host_feed";
}

}  // namespace

double MedianOf(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

StatusOr<InSituTrace> KernelTimesFromTrace(const TraceFile& trace, const Plan& plan,
                                           const InSituOptions& options) {
  if (options.threads < 0 || (options.threads == 0 && options.host_cores < 1)) {
    return InvalidArgumentError("in-situ kernel times: threads ", options.threads,
                                " and host cores ", options.host_cores, " give no thread count");
  }
  if (!(options.warmup_fraction >= 0 && options.warmup_fraction < 1)) {
    return InvalidArgumentError("in-situ kernel times: warm-up fraction ", options.warmup_fraction,
                                " is outside [0, 1)");
  }
  const cost::PlanIndex index(plan);
  std::unordered_map<std::string, const TaskProto*> task_by_name;
  for (const TaskProto* task : index.tasks()) task_by_name.emplace(task->name(), task);

  // Acts and kernel slices per thread track.
  std::map<std::pair<int64_t, int64_t>, std::vector<Act>> acts;
  std::map<std::pair<int64_t, int64_t>, std::vector<const TraceRecord*>> kernels;
  int64_t first_iteration = -1, last_iteration = -1;
  bool every_act_has_iteration = true;
  double span_begin = 0, span_end = 0;
  bool any_act = false;
  for (const TraceRecord& record : trace.events) {
    if (record.phase != "X") continue;
    const std::pair<int64_t, int64_t> track{record.pid, record.tid};
    if (record.category == "kernel") {
      kernels[track].push_back(&record);
      continue;
    }
    if (record.category != "act") continue;
    // Task ids use at most 63 bits, and a JSON number holds 53 exactly: a
    // task of machine >= 32 might not round-trip, so the act's name (the
    // task's) decides when the id finds no task or another one.
    const TaskProto* task = nullptr;
    const double id = record.NumberArg("task", -1);
    if (id >= 0) {
      const TaskProto* by_id = index.task(static_cast<int64_t>(id));
      if (by_id != nullptr && by_id->name() == record.name) task = by_id;
    }
    if (task == nullptr) {
      auto it = task_by_name.find(record.name);
      if (it != task_by_name.end()) task = it->second;
    }
    const double iteration = record.NumberArg("iteration", -1);
    const int64_t it = iteration >= 0 ? static_cast<int64_t>(iteration) : -1;
    if (it < 0) {
      every_act_has_iteration = false;
    } else {
      first_iteration = first_iteration < 0 ? it : std::min(first_iteration, it);
      last_iteration = std::max(last_iteration, it);
    }
    span_begin = any_act ? std::min(span_begin, record.ts_us) : record.ts_us;
    span_end = any_act ? std::max(span_end, record.end_us()) : record.end_us();
    any_act = true;
    acts[track].push_back(Act{&record, task, it});
  }

  InSituTrace result;
  const bool by_iteration = any_act && every_act_has_iteration;
  double counted_from_us = 0;  // without iterations: the warm-up's end
  if (by_iteration) {
    result.first_iteration = first_iteration;
    result.end_iteration = last_iteration + 1;
    const int64_t all = result.end_iteration - first_iteration;
    result.first_counted =
        first_iteration + static_cast<int64_t>(std::floor(all * options.warmup_fraction));
    result.iterations = result.end_iteration - result.first_counted;
  } else if (any_act) {
    counted_from_us = span_begin + (span_end - span_begin) * options.warmup_fraction;
  }
  auto counted = [&](const Act& act) {
    return by_iteration ? act.iteration >= result.first_counted
                        : act.record->ts_us >= counted_from_us;
  };

  // The end of each counted iteration (and of the one before, which starts
  // the first counted step).
  if (by_iteration) {
    std::map<int64_t, double> ends;
    for (const auto& [track, list] : acts) {
      for (const Act& act : list) {
        if (act.iteration < result.first_counted - 1) continue;
        double& end = ends[act.iteration];
        end = std::max(end, act.record->end_us());
      }
    }
    if (ends.size() >= 2) {
      const auto first = ends.begin();
      const auto last = std::prev(ends.end());
      result.step_us =
          (last->second - first->second) / static_cast<double>(last->first - first->first);
    }
  }

  // Each kernel slice to the act that encloses it on its track: acts of one
  // thread do not overlap, so it is the last act that starts at or before
  // the slice.
  struct KeyOf {
    std::string key;
    bool keyed = false;
  };
  std::map<std::pair<const TaskProto*, int>, KeyOf> key_cache;
  for (auto& [track, list] : acts) {
    std::sort(list.begin(), list.end(),
              [](const Act& a, const Act& b) { return a.record->ts_us < b.record->ts_us; });
  }
  for (const auto& [track, slices] : kernels) {
    auto found = acts.find(track);
    for (const TraceRecord* slice : slices) {
      const Act* act = nullptr;
      if (found != acts.end()) {
        const std::vector<Act>& list = found->second;
        auto after = std::upper_bound(list.begin(), list.end(), slice->ts_us + kRoundingUs,
                                      [](double ts, const Act& a) { return ts < a.record->ts_us; });
        if (after != list.begin()) {
          const Act& candidate = *std::prev(after);
          if (slice->end_us() <= candidate.record->end_us() + kRoundingUs) act = &candidate;
        }
      }
      // A slice outside every act cannot be placed in an iteration: it
      // counts as unmatched when it lies after the warm-up by time.
      if (act == nullptr) {
        if (slice->ts_us >= counted_from_us) ++result.unmatched_slices;
        continue;
      }
      if (!counted(*act)) continue;
      if (act->task == nullptr) {
        ++result.unmatched_slices;
        continue;
      }
      const TaskProto& task = *act->task;
      int position = -1;
      for (int k = 0; k < task.kernel_size(); ++k) {
        if (task.kernel(k).op().name() == slice->name) {
          position = k;
          break;
        }
      }
      if (position < 0) {
        ++result.unmatched_slices;
        continue;
      }
      const KernelConf& conf = task.kernel(position);
      auto [cached, fresh] = key_cache.try_emplace({&task, position});
      if (fresh && ProfilerKeys(task, conf)) {
        const int threads =
            options.threads > 0
                ? options.threads
                : cost::CpuThreadsOf(MachineOf(plan, task.machine_id()), options.host_cores);
        StatusOr<std::string> key = cost::KernelKey(conf, DEVICE_CPU, threads, index);
        if (!key.ok()) {
          return key.status().WithContext("task '" + task.name() + "', op '" + conf.op().name() +
                                          "'");
        }
        cached->second.key = *key;
        cached->second.keyed = true;
        InSituKernel& kernel = result.kernels[*key];
        kernel.op_type = conf.op().op_type();
        kernel.device_type = DEVICE_CPU;
        kernel.threads = threads;
      }
      if (!cached->second.keyed) {
        ++result.other_slices;
        continue;
      }
      result.kernels[cached->second.key].durations_us.push_back(slice->dur_us);
    }
  }
  // Keys met only in the warm-up got an entry with no calls.
  for (auto it = result.kernels.begin(); it != result.kernels.end();) {
    it = it->second.durations_us.empty() ? result.kernels.erase(it) : std::next(it);
  }
  if (result.kernels.empty()) {
    return InvalidArgumentError(
        "the trace has no kernel slice of a CPU compute or source task of the plan after its "
        "warm-up (",
        trace.events.size(), " events, ", result.unmatched_slices,
        " kernel slice(s) of no task of the plan): not a trace of a run of this plan?");
  }
  return result;
}

std::vector<std::string> SetInSituTimes(const std::map<std::string, double>& in_situ_us,
                                        Calibration* calibration) {
  std::map<std::string, bool> used;
  for (const auto& [key, us] : in_situ_us) used[key] = false;
  for (KernelCost& kernel : *calibration->mutable_kernel()) {
    auto it = in_situ_us.find(kernel.key());
    if (it == in_situ_us.end()) continue;
    kernel.set_in_situ_us(it->second);
    used[kernel.key()] = true;
  }
  std::vector<std::string> missing;
  for (const auto& [key, found] : used) {
    if (!found) missing.push_back(key);
  }
  return missing;
}

std::vector<InSituFactor> UpdateInSituFactors(Calibration* calibration) {
  using Group = std::tuple<std::string, int, int>;  // op type, device type, threads
  // Time-weighted: sum of in-situ times over sum of isolated times, so a
  // sub-microsecond scalar kernel (whose in-situ time is mostly the clock
  // reads around it) does not set the factor of the op type's big kernels.
  struct Sums {
    double in_situ = 0;
    double alone = 0;
    int kernels = 0;
  };
  std::map<Group, Sums> ratios;
  for (const KernelCost& kernel : calibration->kernel()) {
    if (!(kernel.us() > 0) || !(kernel.in_situ_us() > 0)) continue;
    Sums& sums = ratios[{kernel.op_type(), kernel.device_type(), kernel.threads()}];
    sums.in_situ += kernel.in_situ_us();
    sums.alone += kernel.us();
    ++sums.kernels;
  }
  std::vector<InSituFactor> computed;
  for (auto& [group, sums] : ratios) {
    InSituFactor factor;
    factor.set_op_type(std::get<0>(group));
    factor.set_device_type(static_cast<DeviceType>(std::get<1>(group)));
    factor.set_threads(std::get<2>(group));
    factor.set_kernels(sums.kernels);
    factor.set_factor(sums.in_situ / sums.alone);
    computed.push_back(std::move(factor));
  }
  auto group_of = [](const InSituFactor& f) {
    return Group{f.op_type(), f.device_type(), f.threads()};
  };
  std::vector<InSituFactor> all;
  for (const InSituFactor& old : calibration->in_situ_factor()) {
    if (ratios.count(group_of(old)) == 0) all.push_back(old);
  }
  all.insert(all.end(), computed.begin(), computed.end());
  std::sort(all.begin(), all.end(), [&](const InSituFactor& a, const InSituFactor& b) {
    return group_of(a) < group_of(b);
  });
  calibration->clear_in_situ_factor();
  for (InSituFactor& factor : all) *calibration->add_in_situ_factor() = std::move(factor);
  return computed;
}

}  // namespace cli
}  // namespace oflite
