// What `oflite run --trace` and `oflite launch ... -- --trace DIR` add to a
// run (docs/tracing.md): the window flag, where each rank's file goes, the
// clock offset to rank 0 measured through the control plane, and finding
// the rank files launch merges.
//
// Clock offset (MeasureClockOffset): every rank calls it once, right after
// joining the job; rank 0 answers each other rank's pings in rank order
// through the control plane's key-value store (ping key put by the rank,
// pong key with rank 0's steady clock put by rank 0), a few rounds each; a
// rank keeps the round with the shortest round trip: offset = rank 0's
// time - the middle of the round trip, uncertainty = half of it. Blocks up
// to `timeout` per key; a peer that does not answer fails the call naming
// the rank.
//
// Agreement (AgreeOnTracing): every rank of a multi-machine run, traced or
// not, states whether it traces before anything else uses the control
// plane for tracing, so a job whose ranks were started by hand with and
// without --trace fails at once on every rank, naming the ranks that
// differ, instead of waiting out the clock measurement's timeout.
#ifndef ONEFLOW_LITE_SESSION_TRACE_SUPPORT_H_
#define ONEFLOW_LITE_SESSION_TRACE_SUPPORT_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/trace/trace.h"

namespace oflite {
namespace session {

// "A:B" -> [A, B) with 0 <= A < B; InvalidArgument naming --trace-iters.
Status ParseTraceIters(const std::string& text, int64_t* first, int64_t* end);

// The file rank `rank` writes for --trace `flag`: the flag itself for a
// one-machine plan, else "<flag>/rank-<rank>.json" (the directory is
// created). InvalidArgument naming the flag when it cannot be.
StatusOr<std::string> TraceFileForRank(const std::string& flag, int64_t machines, int64_t rank);

StatusOr<trace::TraceClock> MeasureClockOffset(comm::control::ControlClient* control,
                                               std::chrono::milliseconds timeout);

// Puts whether this rank traces (`traced`) and reads every other rank's
// statement (each Get bounded by `timeout`): InvalidArgument naming the
// ranks that differ from this one and the flag when any does; the control
// plane's error (naming the rank) when a statement does not come.
Status AgreeOnTracing(comm::control::ControlClient* control, bool traced,
                      std::chrono::milliseconds timeout);

// The "--trace DIR" (or "--trace=DIR") among `args`, or "" if none.
std::string TraceDirInArgs(const std::vector<std::string>& args);

// The rank files of a launched job in `dir` (rank-0.json .. rank-<n-1>.json);
// NotFound naming the first one missing.
StatusOr<std::vector<std::string>> RankTraceFiles(const std::string& dir, int64_t ranks);

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_TRACE_SUPPORT_H_
