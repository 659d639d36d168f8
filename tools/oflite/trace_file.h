// Reading and merging the trace files `oflite run --trace` writes (Chrome
// trace-event JSON, docs/tracing.md).
//
// ReadTraceFile parses any trace-event JSON object file with a
// "traceEvents" array; errors name the file (and the event index for a
// malformed event). MergeRankTraces puts the per-rank files of one job
// into one file: each rank's timestamps are shifted onto rank 0's clock by
// the offset its file states (measured through the control plane at start,
// common/trace/trace.h TraceClock), and the merged file's "otherData"
// states every rank's offset and its uncertainty. Plain functions; no
// shared state.
#ifndef ONEFLOW_LITE_TOOLS_OFLITE_TRACE_FILE_H_
#define ONEFLOW_LITE_TOOLS_OFLITE_TRACE_FILE_H_

#include <google/protobuf/struct.pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace cli {

struct TraceRecord {
  std::string phase;  // "X", "s", "f", ...
  std::string category;
  std::string name;
  int64_t pid = 0;
  int64_t tid = 0;
  double ts_us = 0;
  double dur_us = 0;  // "X" only
  double end_us() const { return ts_us + dur_us; }
  uint64_t flow_id = 0;
  bool has_flow_id = false;
  google::protobuf::Struct args;
  // Numeric arg `key`, or `fallback` when absent.
  double NumberArg(const std::string& key, double fallback = -1) const;
  std::string StringArg(const std::string& key) const;
};

struct TraceFile {
  std::vector<TraceRecord> events;  // metadata ("M") events excluded
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;  // (pid, tid)
  std::map<int64_t, std::string> process_names;
  google::protobuf::Struct other_data;
  double OtherNumber(const std::string& key, double fallback) const;
  // A string of otherData (e.g. "trace_level"), or `fallback`.
  std::string OtherString(const std::string& key, const std::string& fallback) const;
};

StatusOr<TraceFile> ReadTraceFile(const std::string& path);

// Writes `file` as trace-event JSON to `path`.
Status WriteTraceFile(const TraceFile& file, const std::string& path);

// Merges per-rank trace files (one per rank, each written by `oflite run
// --trace`) into `output`. InvalidArgument naming a file that is not a
// rank trace, or two files of the same rank.
Status MergeRankTraces(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_OFLITE_TRACE_FILE_H_
