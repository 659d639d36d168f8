// `oflite trace summary`: where the time of a traced run went, read from a
// trace file (trace_file.h; docs/tracing.md says what each figure means).
//
// Per rank (process) of the trace:
// - span: first event to last; iterations seen (from "iteration" args) and
//   the step time: the mean distance between the ends of consecutive
//   iterations (the end of an iteration: its last slice on the rank);
// - per stream thread: busy (union of its slices), idle = span - busy, idle
//   fraction; runtime time = busy - kernel time;
// - per op: kernel slices by op name (calls, total, mean);
// - per actor: "handle" slices by actor (messages, acts, time, mean idle
//   before an act);
// - communication: union of "transfer" and "collective" slices, split into
//   the part overlapped by some kernel of the rank and the exposed rest;
// - accounting per iteration: (kernel + runtime + idle time of the stream
//   threads) / iterations against threads x step time: a consistency check
//   of this arithmetic against the iteration spans.
// And for the whole trace: the critical path of one iteration (the middle
// one of those every rank recorded acts of): from the handling that holds
// the iteration's last-ending act back through the message that enabled
// each handling (for a produced message: the sender's last handling before
// it in which it acted, on whichever rank; for a wake-up or a READ's
// completion: the handling that started that work), each step with its
// duration and the wait before it; it starts at a handling enabled by the
// runtime's start or by a returned register (back-pressure).
#ifndef ONEFLOW_LITE_TOOLS_OFLITE_TRACE_SUMMARY_H_
#define ONEFLOW_LITE_TOOLS_OFLITE_TRACE_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/oflite/trace_file.h"

namespace oflite {
namespace cli {

struct ThreadTime {
  int64_t tid = 0;
  std::string name;
  // A runtime stream thread; else a collective's ("ring <task>") or a
  // CommNet actor's READs ("transfers <task>") track.
  bool stream = false;
  double busy_us = 0;
  double idle_us = 0;
  double kernel_us = 0;
};

struct NamedTotal {
  int64_t count = 0;
  double total_us = 0;
  int64_t acts = 0;           // actors only
  double idle_before_us = 0;  // actors only: sum over acts
};

struct RankSummary {
  int64_t rank = 0;
  double span_us = 0;
  int64_t iterations = 0;
  int64_t first_iteration = -1;
  double step_us = 0;
  // The step time the session measured from its sink's reports over the
  // same window (independent of the trace's slices); -1 when not stated.
  double measured_step_us = -1;
  std::vector<ThreadTime> threads;
  std::map<std::string, NamedTotal> ops;
  std::map<std::string, NamedTotal> actors;
  double comm_us = 0;
  double comm_exposed_us = 0;
  double comm_overlapped_us = 0;
  // Per iteration, over the stream threads.
  double kernel_per_iter_us = 0;
  double runtime_per_iter_us = 0;
  double idle_per_iter_us = 0;
  int64_t stream_threads = 0;
};

struct PathStep {
  int64_t rank = 0;
  std::string actor;
  std::string message;  // what it handled (and so waited for)
  double wait_us = 0;   // from the previous step's end
  double dur_us = 0;
};

struct TraceSummary {
  // "acts" (handling between acts is not recorded: it counts as idle) or
  // "messages" (every handling recorded), from the file; "mixed" when the
  // ranks of a merged file differ.
  std::string trace_level;
  std::vector<RankSummary> ranks;
  int64_t critical_iteration = -1;
  double critical_path_us = 0;
  std::vector<PathStep> critical_path;  // in time order
};

TraceSummary Summarize(const TraceFile& file);
std::string SummaryText(const TraceSummary& summary);
std::string SummaryJson(const TraceSummary& summary);

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_OFLITE_TRACE_SUMMARY_H_
