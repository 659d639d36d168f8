// Runs one process per rank (the launcher behind `oflite launch`): each
// child's stdout and stderr are merged and every line is printed with a
// "[rank R] " prefix; when a child fails (non-zero exit or a signal) the
// others get SIGTERM, then SIGKILL after a grace period, and the result
// names the first failed rank. Children run in their own process groups so
// that what they start (ssh, shells) is stopped with them.
//
// RunProcessGroup blocks until every child has exited; it is bounded by the
// children themselves plus the grace period once one fails (or when
// `timeout` passes, which fails the group with DeadlineExceeded). Call it
// from one thread; it changes no global state except reaping its children.
#ifndef ONEFLOW_LITE_COMM_LAUNCH_PROCESS_GROUP_H_
#define ONEFLOW_LITE_COMM_LAUNCH_PROCESS_GROUP_H_

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {

struct RankProcess {
  std::vector<std::string> argv;         // argv[0] is looked up in PATH
  std::vector<std::string> environment;  // extra "KEY=VALUE" entries
};

struct ProcessGroupOptions {
  std::chrono::milliseconds grace{5000};
  std::chrono::milliseconds timeout{std::chrono::hours(24 * 365)};
  FILE* output = stdout;
};

struct ProcessGroupResult {
  bool ok = true;
  int failed_rank = -1;  // the first rank that failed
  int exit_code = 0;     // its exit code, or 128 + signal
  std::string message;   // e.g. "rank 1 exited with code 3; stopped the others"
};

// Non-OK only when a child cannot be started (e.g. fork/pipe failure).
StatusOr<ProcessGroupResult> RunProcessGroup(
    const std::vector<RankProcess>& ranks, const ProcessGroupOptions& options);

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_LAUNCH_PROCESS_GROUP_H_
