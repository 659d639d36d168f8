#include "tools/oflite/trace_summary.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "oneflow_lite/common/trace/trace.h"

namespace oflite {
namespace cli {
namespace {

using Interval = std::pair<double, double>;

// Sorted, disjoint union of `intervals` clipped to [lo, hi].
std::vector<Interval> Union(std::vector<Interval> intervals, double lo, double hi) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<Interval> out;
  for (auto [begin, end] : intervals) {
    begin = std::max(begin, lo);
    end = std::min(end, hi);
    if (end <= begin) continue;
    if (!out.empty() && begin <= out.back().second) {
      out.back().second = std::max(out.back().second, end);
    } else {
      out.push_back({begin, end});
    }
  }
  return out;
}

double Length(const std::vector<Interval>& intervals) {
  double total = 0;
  for (const auto& [begin, end] : intervals) total += end - begin;
  return total;
}

// Length of the intersection of two sorted disjoint unions.
double Overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double begin = std::max(a[i].first, b[j].first);
    const double end = std::min(a[i].second, b[j].second);
    if (end > begin) total += end - begin;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return total;
}

bool IsStreamTrack(const std::string& name) {
  return name.rfind("ring ", 0) != 0 && name.rfind("transfers ", 0) != 0;
}

bool IsComm(const TraceRecord& event) {
  return event.category == "transfer" || event.category == "collective";
}

// One message handling: a "handle" slice, or, where the trace has none
// around an act (--trace-level acts records only some handlings), the act
// slice itself standing for the handling of the message that let it run.
// `acted`: an act slice lies inside it (always, for an act standing in).
struct Handling {
  const TraceRecord* event;
  int64_t actor;
  int64_t from;
  std::string kind;     // first word of the message
  std::string message;  // the message, as the trace describes it
  bool acted = false;
  int64_t iteration = -1;  // the message's iteration (handle slices), -1 unknown
};

std::string FirstWord(const std::string& text) { return text.substr(0, text.find(' ')); }

// Every handling in time order, with `acted` set from the act slices
// (nested in their handling on the same track).
std::vector<Handling> Handlings(const TraceFile& file) {
  std::vector<Handling> out;
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> by_track;
  for (const TraceRecord& event : file.events) {
    if (event.phase != "X" || event.category != "handle") continue;
    const std::string message = event.StringArg("message");
    out.push_back({&event, static_cast<int64_t>(event.NumberArg("actor")),
                   static_cast<int64_t>(event.NumberArg("from")), FirstWord(message), message,
                   false, static_cast<int64_t>(event.NumberArg("message_iteration", -1))});
  }
  std::sort(out.begin(), out.end(),
            [](const Handling& a, const Handling& b) { return a.event->ts_us < b.event->ts_us; });
  for (size_t i = 0; i < out.size(); ++i)
    by_track[{out[i].event->pid, out[i].event->tid}].push_back(i);
  std::vector<Handling> standing_in;
  for (const TraceRecord& act : file.events) {
    if (act.phase != "X" || act.category != "act") continue;
    const std::vector<size_t>& track = by_track[{act.pid, act.tid}];
    // The last handling starting at or before the act.
    auto it = std::upper_bound(track.begin(), track.end(), act.ts_us,
                               [&out](double ts, size_t i) { return ts < out[i].event->ts_us; });
    if (it != track.begin() && out[*std::prev(it)].event->end_us() >= act.end_us()) {
      out[*std::prev(it)].acted = true;
      continue;
    }
    const std::string message = act.StringArg("ready_after");
    standing_in.push_back({&act, static_cast<int64_t>(act.NumberArg("task")),
                           static_cast<int64_t>(act.NumberArg("ready_from", -1)),
                           FirstWord(message), message, true});
  }
  if (!standing_in.empty()) {
    out.insert(out.end(), standing_in.begin(), standing_in.end());
    std::stable_sort(out.begin(), out.end(), [](const Handling& a, const Handling& b) {
      return a.event->ts_us < b.event->ts_us;
    });
  }
  return out;
}

void SummarizeThreads(const TraceFile& file, int64_t pid, double lo, double hi, RankSummary* rank) {
  std::map<int64_t, std::vector<Interval>> slices, kernels, whole;
  for (const TraceRecord& event : file.events) {
    if (event.pid != pid || event.phase != "X") continue;
    slices[event.tid].push_back({event.ts_us, event.end_us()});
    if (event.category == "kernel") kernels[event.tid].push_back({event.ts_us, event.end_us()});
  }
  for (auto& [tid, intervals] : slices) {
    ThreadTime thread;
    thread.tid = tid;
    auto name = file.thread_names.find({pid, tid});
    thread.name = name != file.thread_names.end() ? name->second : std::to_string(tid);
    thread.stream = IsStreamTrack(thread.name);
    thread.busy_us = Length(Union(intervals, lo, hi));
    thread.idle_us = (hi - lo) - thread.busy_us;
    thread.kernel_us = Length(Union(kernels[tid], lo, hi));
    rank->threads.push_back(thread);
  }
}

// The step time rank `pid`'s session timed itself (otherData of a rank
// file, or its entry in a merged file's "ranks"); -1 when not stated.
// A merged file's otherData.ranks (one entry per rank), or null for a rank
// file.
const google::protobuf::ListValue* MergedRanks(const TraceFile& file) {
  const auto& fields = file.other_data.fields();
  auto ranks = fields.find("ranks");
  return ranks != fields.end() && ranks->second.has_list_value() ? &ranks->second.list_value()
                                                                  : nullptr;
}

double MeasuredStep(const TraceFile& file, int64_t pid) {
  if (const google::protobuf::ListValue* ranks = MergedRanks(file)) {
    for (const auto& entry : ranks->values()) {
      const auto& info = entry.struct_value().fields();
      auto rank = info.find("rank");
      auto step = info.find("measured_step_us");
      if (rank != info.end() && step != info.end() && rank->second.number_value() == pid) {
        return step->second.number_value();
      }
    }
    return -1;
  }
  return file.OtherNumber("rank", -1) == pid ? file.OtherNumber("measured_step_us", -1) : -1;
}

RankSummary SummarizeRank(const TraceFile& file, const std::vector<Handling>& handlings,
                          int64_t pid) {
  RankSummary rank;
  // Messages handled per actor (an act standing in for its handling counts
  // the message that let it run, with the act's time).
  for (const Handling& handling : handlings) {
    if (handling.event->pid != pid) continue;
    NamedTotal& actor = rank.actors[handling.event->name];
    ++actor.count;
    actor.total_us += handling.event->dur_us;
  }
  rank.rank = pid;
  rank.measured_step_us = MeasuredStep(file, pid);
  double first = 1e300, last = -1e300;
  std::map<int64_t, double> iteration_end;
  std::vector<Interval> comm, compute;
  for (const TraceRecord& event : file.events) {
    if (event.pid != pid || event.phase != "X") continue;
    first = std::min(first, event.ts_us);
    last = std::max(last, event.end_us());
    const double iteration = event.NumberArg("iteration");
    if (iteration >= 0) {
      double& end = iteration_end[static_cast<int64_t>(iteration)];
      end = std::max(end, event.end_us());
    }
    if (event.category == "kernel") {
      NamedTotal& op = rank.ops[event.name];
      ++op.count;
      op.total_us += event.dur_us;
      compute.push_back({event.ts_us, event.end_us()});
    }
    if (event.category == "act") {
      NamedTotal& actor = rank.actors[event.name];
      ++actor.acts;
      actor.idle_before_us += std::max(0.0, event.NumberArg("idle_before_us", 0));
    }
    if (IsComm(event)) comm.push_back({event.ts_us, event.end_us()});
  }
  if (first > last) return rank;
  rank.span_us = last - first;
  rank.iterations = static_cast<int64_t>(iteration_end.size());
  // The accounting window: from the end of the first iteration to the end of
  // the last (n - 1 steps); the whole span when fewer than two.
  double lo = first, hi = last;
  int64_t steps = 1;
  if (rank.iterations >= 2) {
    rank.first_iteration = iteration_end.begin()->first;
    lo = iteration_end.begin()->second;
    hi = iteration_end.rbegin()->second;
    steps = rank.iterations - 1;
  }
  rank.step_us = (hi - lo) / static_cast<double>(steps);
  SummarizeThreads(file, pid, lo, hi, &rank);
  for (const ThreadTime& thread : rank.threads) {
    if (!thread.stream) continue;
    ++rank.stream_threads;
    rank.kernel_per_iter_us += thread.kernel_us / steps;
    rank.runtime_per_iter_us += (thread.busy_us - thread.kernel_us) / steps;
    rank.idle_per_iter_us += thread.idle_us / steps;
  }
  const std::vector<Interval> comm_union = Union(comm, first, last);
  rank.comm_us = Length(comm_union);
  rank.comm_overlapped_us = Overlap(comm_union, Union(compute, first, last));
  rank.comm_exposed_us = rank.comm_us - rank.comm_overlapped_us;
  return rank;
}

// "collective:all_reduce:g" for "collective:all_reduce:g@1": one collective
// across its ranks.
std::string CollectiveOf(const std::string& actor_name) {
  if (actor_name.rfind("collective:", 0) != 0) return "";
  return actor_name.substr(0, actor_name.rfind('@'));
}

// Where a collective's completion on one rank waited for another rank: the
// latest handling on another rank that started the same collective of the
// same iteration (its input's "produced"), when it ended after `own_start`
// (this rank's), else null. A collective cannot finish before every rank
// started it, so a later start elsewhere is on the path.
const Handling* LaterStartElsewhere(const std::vector<Handling>& all, const Handling& done,
                                    const Handling& own_start) {
  const std::string collective = CollectiveOf(done.event->name);
  if (collective.empty() || own_start.iteration < 0) return nullptr;
  const Handling* latest = &own_start;
  for (const Handling& candidate : all) {
    if (candidate.event->ts_us >= done.event->ts_us) break;
    if (candidate.event->pid == done.event->pid || candidate.kind != "produced" ||
        candidate.iteration != own_start.iteration ||
        CollectiveOf(candidate.event->name) != collective) {
      continue;
    }
    if (candidate.event->end_us() > latest->event->end_us()) latest = &candidate;
  }
  return latest != &own_start ? latest : nullptr;
}

// The handling that enabled `current`, or null: for a produced message,
// the sender's last handling before it in which it acted (any but a
// returned one for actors that never record acts: CommNet, collectives);
// for a wake-up or a READ's completion, the actor's own previous handling,
// which started that work, or for a collective's completion the start of
// the same collective on another rank where that came later (the path
// crosses ranks there). A returned message (back-pressure: the act waited
// for a free register) or the runtime's start ends the path.
const Handling* Predecessor(const std::vector<Handling>& all,
                            const std::set<int64_t>& acting_actors, const Handling& current) {
  int64_t actor = -1;
  if (current.kind == "produced") actor = current.from;
  // "start" from an actor: a READ completion in traces written before
  // completions had their own kind ("read-done").
  if (current.kind == "wake-up" || current.kind == "read-done" ||
      (current.kind == "start" && current.from >= 0)) {
    actor = current.actor;
  }
  if (actor < 0) return nullptr;
  const bool acts = acting_actors.count(actor) > 0;
  const Handling* best = nullptr;
  for (const Handling& candidate : all) {
    if (candidate.event->ts_us >= current.event->ts_us) break;
    if (candidate.actor != actor) continue;
    if (acts ? candidate.acted
             : (candidate.kind != "returned" && candidate.kind != "end-of-data")) {
      best = &candidate;
    }
  }
  if (best != nullptr && current.kind == "wake-up") {
    const Handling* elsewhere = LaterStartElsewhere(all, current, *best);
    if (elsewhere != nullptr) return elsewhere;
  }
  return best;
}

// The iteration every rank recorded acts of, in the middle of them.
int64_t MiddleCommonIteration(const TraceFile& file, const std::vector<RankSummary>& ranks) {
  std::map<int64_t, std::set<int64_t>> ranks_of;  // iteration -> ranks with acts in it
  for (const TraceRecord& event : file.events) {
    if (event.category == "act") {
      ranks_of[static_cast<int64_t>(event.NumberArg("iteration"))].insert(event.pid);
    }
  }
  std::vector<int64_t> common;
  for (const auto& [iteration, pids] : ranks_of) {
    if (iteration >= 0 && pids.size() == ranks.size()) common.push_back(iteration);
  }
  return common.empty() ? -1 : common[common.size() / 2];
}

void CriticalPath(const TraceFile& file, const std::vector<Handling>& all,
                  TraceSummary* summary) {
  summary->critical_iteration = MiddleCommonIteration(file, summary->ranks);
  if (summary->critical_iteration < 0) return;
  std::set<int64_t> acting_actors;
  for (const Handling& handling : all) {
    if (handling.acted) acting_actors.insert(handling.actor);
  }
  // The handling holding the iteration's last-ending act.
  const TraceRecord* last_act = nullptr;
  for (const TraceRecord& event : file.events) {
    if (event.category == "act" && event.NumberArg("iteration") == summary->critical_iteration &&
        (last_act == nullptr || event.end_us() > last_act->end_us())) {
      last_act = &event;
    }
  }
  const Handling* current = nullptr;
  for (const Handling& handling : all) {
    if (handling.event->pid == last_act->pid && handling.event->tid == last_act->tid &&
        handling.event->ts_us <= last_act->ts_us &&
        handling.event->end_us() >= last_act->end_us()) {
      current = &handling;
    }
  }
  std::vector<const Handling*> chain;
  while (current != nullptr && chain.size() < 100000) {
    chain.push_back(current);
    current = Predecessor(all, acting_actors, *current);
  }
  std::reverse(chain.begin(), chain.end());
  for (size_t i = 0; i < chain.size(); ++i) {
    const TraceRecord& event = *chain[i]->event;
    PathStep step;
    step.rank = event.pid;
    step.actor = event.name;
    step.message = chain[i]->message;
    step.dur_us = event.dur_us;
    step.wait_us = i == 0 ? 0 : event.ts_us - chain[i - 1]->event->end_us();
    summary->critical_path.push_back(step);
  }
  if (!chain.empty()) {
    summary->critical_path_us = chain.back()->event->end_us() - chain.front()->event->ts_us;
  }
}

// otherData.trace_level of a rank file, or its ranks' in a merged one;
// files written before levels existed recorded every message.
std::string TraceLevel(const TraceFile& file) {
  const google::protobuf::ListValue* ranks = MergedRanks(file);
  if (ranks == nullptr) return file.OtherString("trace_level", "messages");
  std::set<std::string> levels;
  for (const auto& entry : ranks->values()) {
    const auto& info = entry.struct_value().fields();
    auto level = info.find("trace_level");
    levels.insert(level != info.end() ? level->second.string_value() : "messages");
  }
  return levels.size() == 1 ? *levels.begin() : "mixed";
}

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

}  // namespace

TraceSummary Summarize(const TraceFile& file) {
  TraceSummary summary;
  std::set<int64_t> pids;
  for (const TraceRecord& event : file.events) pids.insert(event.pid);
  summary.trace_level = TraceLevel(file);
  const std::vector<Handling> handlings = Handlings(file);
  for (int64_t pid : pids) summary.ranks.push_back(SummarizeRank(file, handlings, pid));
  CriticalPath(file, handlings, &summary);
  return summary;
}

std::string SummaryText(const TraceSummary& summary) {
  std::ostringstream os;
  os << "trace level: " << summary.trace_level
     << (summary.trace_level == "messages"
             ? " (every message handled)\n"
             : " (messages that let no act run were not recorded: their handling counts as "
               "idle; --trace-level messages records them)\n");
  for (const RankSummary& rank : summary.ranks) {
    os << "rank " << rank.rank << ": span " << Format("%.3f", rank.span_us / 1000) << " ms, "
       << rank.iterations << " iterations, step " << Format("%.3f", rank.step_us / 1000) << " ms";
    if (rank.measured_step_us > 0) {
      os << " (the session timed " << Format("%.3f", rank.measured_step_us / 1000) << " ms)";
    }
    os << "\n";
    os << "  per iteration over " << rank.stream_threads << " stream thread(s): kernels "
       << Format("%.3f", rank.kernel_per_iter_us / 1000) << " ms + runtime "
       << Format("%.3f", rank.runtime_per_iter_us / 1000) << " ms + idle "
       << Format("%.3f", rank.idle_per_iter_us / 1000) << " ms (threads x step "
       << Format("%.3f", rank.stream_threads * rank.step_us / 1000) << " ms)\n";
    os << "  threads (idle fraction of the steps' window):\n";
    for (const ThreadTime& thread : rank.threads) {
      const double window = thread.busy_us + thread.idle_us;
      os << "    " << thread.name << ": busy " << Format("%.3f", thread.busy_us / 1000)
         << " ms, kernels " << Format("%.3f", thread.kernel_us / 1000) << " ms, idle "
         << Format("%.1f", window > 0 ? 100 * thread.idle_us / window : 0) << "%\n";
    }
    os << "  communication " << Format("%.3f", rank.comm_us / 1000) << " ms: exposed "
       << Format("%.3f", rank.comm_exposed_us / 1000) << " ms, overlapped with kernels "
       << Format("%.3f", rank.comm_overlapped_us / 1000) << " ms\n";
    std::vector<std::pair<std::string, NamedTotal>> ops(rank.ops.begin(), rank.ops.end());
    std::sort(ops.begin(), ops.end(),
              [](const auto& a, const auto& b) { return a.second.total_us > b.second.total_us; });
    os << "  ops (whole trace)                          calls   total ms    mean us\n";
    for (const auto& [name, total] : ops) {
      char line[200];
      std::snprintf(line, sizeof(line), "    %-40s %6lld %10.3f %10.1f\n", name.c_str(),
                    static_cast<long long>(total.count), total.total_us / 1000,
                    total.total_us / std::max<int64_t>(1, total.count));
      os << line;
    }
    os << "  actors (whole trace)                       msgs   acts   total ms  idle/act us\n";
    for (const auto& [name, total] : rank.actors) {
      char line[200];
      std::snprintf(line, sizeof(line), "    %-40s %6lld %6lld %10.3f %10.1f\n", name.c_str(),
                    static_cast<long long>(total.count), static_cast<long long>(total.acts),
                    total.total_us / 1000, total.idle_before_us / std::max<int64_t>(1, total.acts));
      os << line;
    }
  }
  os << "critical path of iteration " << summary.critical_iteration << ": "
     << Format("%.3f", summary.critical_path_us / 1000) << " ms, " << summary.critical_path.size()
     << " steps\n";
  for (const PathStep& step : summary.critical_path) {
    // A negative wait: the message was sent mid-handling, and the receiver
    // started before the sender's handling ended (another thread or rank).
    os << "  rank " << step.rank << " " << step.actor << ": "
       << (step.wait_us >= 0 ? "waited " + Format("%.1f", step.wait_us) + " us"
                             : "began " + Format("%.1f", -step.wait_us) + " us before it ended")
       << " for " << step.message << ", ran " << Format("%.1f", step.dur_us) << " us\n";
  }
  return os.str();
}

std::string SummaryJson(const TraceSummary& summary) {
  std::ostringstream os;
  auto totals = [&os](const std::map<std::string, NamedTotal>& table) {
    os << "{";
    bool first = true;
    for (const auto& [name, total] : table) {
      os << (first ? "" : ",") << "\"" << trace::JsonEscape(name) << "\":{\"count\":" << total.count
         << ",\"total_us\":" << total.total_us << ",\"acts\":" << total.acts
         << ",\"idle_before_us\":" << total.idle_before_us << "}";
      first = false;
    }
    os << "}";
  };
  os.precision(12);
  os << "{\"trace_level\":\"" << trace::JsonEscape(summary.trace_level) << "\",\"ranks\":[";
  for (size_t r = 0; r < summary.ranks.size(); ++r) {
    const RankSummary& rank = summary.ranks[r];
    os << (r ? "," : "") << "{\"rank\":" << rank.rank << ",\"span_us\":" << rank.span_us
       << ",\"iterations\":" << rank.iterations << ",\"step_us\":" << rank.step_us
       << ",\"measured_step_us\":" << rank.measured_step_us << ",\"stream_threads\":" << rank.stream_threads
       << ",\"kernel_per_iter_us\":" << rank.kernel_per_iter_us
       << ",\"runtime_per_iter_us\":" << rank.runtime_per_iter_us
       << ",\"idle_per_iter_us\":" << rank.idle_per_iter_us << ",\"comm_us\":" << rank.comm_us
       << ",\"comm_exposed_us\":" << rank.comm_exposed_us
       << ",\"comm_overlapped_us\":" << rank.comm_overlapped_us << ",\"threads\":[";
    for (size_t t = 0; t < rank.threads.size(); ++t) {
      const ThreadTime& thread = rank.threads[t];
      os << (t ? "," : "") << "{\"name\":\"" << trace::JsonEscape(thread.name)
         << "\",\"stream\":" << (thread.stream ? "true" : "false")
         << ",\"busy_us\":" << thread.busy_us << ",\"idle_us\":" << thread.idle_us
         << ",\"kernel_us\":" << thread.kernel_us << "}";
    }
    os << "],\"ops\":";
    totals(rank.ops);
    os << ",\"actors\":";
    totals(rank.actors);
    os << "}";
  }
  os << "],\"critical_iteration\":" << summary.critical_iteration
     << ",\"critical_path_us\":" << summary.critical_path_us << ",\"critical_path\":[";
  for (size_t i = 0; i < summary.critical_path.size(); ++i) {
    const PathStep& step = summary.critical_path[i];
    os << (i ? "," : "") << "{\"rank\":" << step.rank << ",\"actor\":\""
       << trace::JsonEscape(step.actor) << "\",\"message\":\"" << trace::JsonEscape(step.message)
       << "\",\"wait_us\":" << step.wait_us << ",\"dur_us\":" << step.dur_us << "}";
  }
  os << "]}\n";
  return os.str();
}

}  // namespace cli
}  // namespace oflite
