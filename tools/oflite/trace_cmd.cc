// oflite trace: read the timeline traces `oflite run --trace` writes
// (docs/tracing.md).
//
//   oflite trace summary FILE [--json]   where the time went (trace_summary.h)
//   oflite trace merge --out OUT RANK_FILE...
//                                        one file from per-rank traces, on
//                                        rank 0's clock (trace_file.h);
//                                        `oflite launch` does this itself
// Exit codes: 0, 2 for a missing or malformed file or a bad flag (the
// message names the file or flag).
#include <cstdio>
#include <cstring>

#include "tools/oflite/commands.h"
#include "oneflow_lite/session/flags.h"
#include "tools/oflite/trace_file.h"
#include "tools/oflite/trace_summary.h"

namespace oflite {
namespace cli {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "oflite trace: %s\n", status.ToString().c_str());
  return kExitBadInput;
}

int RunSummary(int argc, char** argv) {
  FlagSet flags("oflite trace summary", "FILE [--json]",
                {{"json", "print the summary as one JSON object", true, "false"}},
                /*max_positional=*/1);
  if (std::optional<int> done = flags.ParseCommandLine(argc, argv, "oflite trace")) return *done;
  if (flags.positional().empty()) return Fail(InvalidArgumentError("give the trace FILE"));
  StatusOr<TraceFile> file = ReadTraceFile(flags.positional()[0]);
  if (!file.ok()) return Fail(file.status());
  const TraceSummary summary = Summarize(*file);
  const std::string text = flags.GetBool("json") ? SummaryJson(summary) : SummaryText(summary);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

int RunMerge(int argc, char** argv) {
  FlagSet flags("oflite trace merge", "--out OUT RANK_FILE...", {{"out", "the merged trace file"}},
                /*max_positional=*/1024);
  if (std::optional<int> done = flags.ParseCommandLine(argc, argv, "oflite trace")) return *done;
  if (!flags.Has("out")) return Fail(InvalidArgumentError("--out is required"));
  if (flags.positional().empty()) return Fail(InvalidArgumentError("give the rank trace files"));
  Status merged = MergeRankTraces(flags.positional(), flags.Get("out"));
  if (!merged.ok()) return Fail(merged);
  std::printf("merged %zu rank traces into %s\n", flags.positional().size(),
              flags.Get("out").c_str());
  return kExitOk;
}

}  // namespace

int RunTrace(int argc, char** argv) {
  if (argc >= 2 && !std::strcmp(argv[1], "summary")) return RunSummary(argc - 1, argv + 1);
  if (argc >= 2 && !std::strcmp(argv[1], "merge")) return RunMerge(argc - 1, argv + 1);
  std::fprintf(stderr,
               "usage: oflite trace summary FILE [--json]\n"
               "       oflite trace merge --out OUT RANK_FILE...\n");
  return argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help"))
             ? kExitOk
             : kExitBadInput;
}

}  // namespace cli
}  // namespace oflite
