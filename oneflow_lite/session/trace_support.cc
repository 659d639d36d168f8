#include "oneflow_lite/session/trace_support.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "oneflow_lite/session/flags.h"

namespace oflite {
namespace session {
namespace {

constexpr int kClockRounds = 8;

std::string ClockKey(int rank, int round, const char* what) {
  return "oflite/trace/clock/" + std::to_string(rank) + "/" + std::to_string(round) + "/" + what;
}

// Rank 0: answers every other rank's pings in rank order.
Status ServeClock(comm::control::ControlClient* control, std::chrono::milliseconds timeout) {
  for (int rank = 1; rank < control->world_size(); ++rank) {
    for (int round = 0; round < kClockRounds; ++round) {
      StatusOr<std::string> ping = control->Get(ClockKey(rank, round, "ping"), timeout, rank);
      if (!ping.ok()) {
        return ping.status().WithContext("rank 0 measuring the trace clock of rank " +
                                         std::to_string(rank) +
                                         " (is every rank run with "
                                         "--trace?)");
      }
      RETURN_IF_ERROR(control->Put(ClockKey(rank, round, "pong"), std::to_string(trace::NowNs())));
    }
  }
  return Status::OK();
}

}  // namespace

Status ParseTraceIters(const std::string& text, int64_t* first, int64_t* end) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    return InvalidArgumentError("flag '--trace-iters': '", text, "' is not A:B");
  }
  ASSIGN_OR_RETURN(*first, cli::ParseInt64(text.substr(0, colon), "flag '--trace-iters' (A)"));
  ASSIGN_OR_RETURN(*end, cli::ParseInt64(text.substr(colon + 1), "flag '--trace-iters' (B)"));
  if (*first < 0 || *end <= *first) {
    return InvalidArgumentError("flag '--trace-iters': '", text,
                                "' is not a window A:B with 0 <= A < B");
  }
  return Status::OK();
}

StatusOr<std::string> TraceFileForRank(const std::string& flag, int64_t machines, int64_t rank) {
  if (flag.empty()) return InvalidArgumentError("flag '--trace': empty path");
  if (machines <= 1) return flag;
  if (::mkdir(flag.c_str(), 0755) != 0 && errno != EEXIST) {
    return InvalidArgumentError("flag '--trace': cannot create the directory '", flag,
                                "': ", std::strerror(errno));
  }
  return flag + "/rank-" + std::to_string(rank) + ".json";
}

StatusOr<trace::TraceClock> MeasureClockOffset(comm::control::ControlClient* control,
                                               std::chrono::milliseconds timeout) {
  trace::TraceClock clock;
  if (control->rank() == 0) {
    RETURN_IF_ERROR(ServeClock(control, timeout));
    clock.uncertainty_ns = 0;
    return clock;
  }
  int64_t best_round_trip = -1;
  for (int round = 0; round < kClockRounds; ++round) {
    const int64_t sent = trace::NowNs();
    RETURN_IF_ERROR(control->Put(ClockKey(control->rank(), round, "ping"), ""));
    StatusOr<std::string> pong =
        control->Get(ClockKey(control->rank(), round, "pong"), timeout, /*publisher_rank=*/0);
    if (!pong.ok()) {
      return pong.status().WithContext("rank " + std::to_string(control->rank()) +
                                       " measuring its trace clock against rank 0 (is every "
                                       "rank run with --trace?)");
    }
    const int64_t received = trace::NowNs();
    ASSIGN_OR_RETURN(int64_t root_ns, cli::ParseInt64(*pong, "rank 0's trace clock"));
    const int64_t round_trip = received - sent;
    if (best_round_trip < 0 || round_trip < best_round_trip) {
      best_round_trip = round_trip;
      clock.offset_ns = root_ns - (sent + round_trip / 2);
      clock.uncertainty_ns = round_trip / 2;
    }
  }
  return clock;
}

Status AgreeOnTracing(comm::control::ControlClient* control, bool traced,
                      std::chrono::milliseconds timeout) {
  const auto key = [](int rank) { return "oflite/trace/enabled/" + std::to_string(rank); };
  RETURN_IF_ERROR(control->Put(key(control->rank()), traced ? "1" : "0"));
  std::string differing;
  for (int rank = 0; rank < control->world_size(); ++rank) {
    if (rank == control->rank()) continue;
    StatusOr<std::string> stated = control->Get(key(rank), timeout, rank);
    if (!stated.ok()) {
      return stated.status().WithContext("rank " + std::to_string(control->rank()) +
                                         " asking whether rank " + std::to_string(rank) +
                                         " traces");
    }
    if ((*stated == "1") != traced) {
      differing += (differing.empty() ? "" : ", ") + std::to_string(rank);
    }
  }
  if (differing.empty()) return Status::OK();
  return InvalidArgumentError("flag '--trace': rank ", control->rank(),
                              traced ? " traces but rank(s) " : " does not trace but rank(s) ",
                              differing, traced ? " do not" : " do",
                              "; trace every rank of a job or none (oflite launch passes "
                              "--trace to every rank)");
}

std::string TraceDirInArgs(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--trace" && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--trace=", 0) == 0) return args[i].substr(8);
  }
  return "";
}

StatusOr<std::vector<std::string>> RankTraceFiles(const std::string& dir, int64_t ranks) {
  std::vector<std::string> files;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const std::string path = dir + "/rank-" + std::to_string(rank) + ".json";
    struct stat info;
    if (::stat(path.c_str(), &info) != 0) {
      return NotFoundError("the trace of rank ", rank, " ('", path, "') was not written");
    }
    files.push_back(path);
  }
  return files;
}

}  // namespace session
}  // namespace oflite
