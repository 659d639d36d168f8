// Runs one process per rank (the launcher behind `oflite launch`): each
// child's stdout and stderr are merged and every line is printed with a
// "[rank R] " prefix. Children run in their own process groups so that what
// they start (ssh, shells) is signalled with them.
//
// Stopping. When a child fails (non-zero exit or a signal) the others get
// SIGTERM, then SIGKILL after `grace`. A child that exits with
// `peer_failed_exit_code` (it was healthy, another rank failed) does not
// stop the others at once: they get `grace` to end on their own first, so
// that the rank that really failed can exit and report its own error. A
// frozen child (stopped by SIGSTOP or the like, as waitpid reports it: a
// local child, not the far side of ssh) cannot act on SIGTERM, so it gets
// SIGKILL instead; and once every other child has exited with
// `peer_failed_exit_code` (they all lost a peer: this one), a frozen child
// that is the only one left is killed at once, without waiting out the
// grace. When `*interrupt` becomes non-zero (a signal number, set by the
// caller's signal handler), that signal is forwarded to every running
// child, then SIGKILL after `grace`; the result says it was interrupted.
//
// Blame. Once every child has exited, the result names the first cause:
// children killed by a signal the group did not send, else children that
// exited non-zero with another code than `peer_failed_exit_code`, else the
// child the others lost (RankOutcome::lost_by_peers: the only one left
// after every other exited with `peer_failed_exit_code`, and it was frozen
// or ignored SIGTERM until SIGKILL), else those that exited with
// `peer_failed_exit_code`; within a class the earliest exit. Other children
// that ended after the group signalled them are blamed only when nothing
// else failed. The blamed child's cause is its last error line (the last
// line it printed that looks like an error: "oflite ...", a glog E/F line,
// or containing "error"/"failed"; else its last line; none for a child
// that ended by a signal, the one the others lost included: what it
// printed before it hung does not say why).
//
// RunProcessGroup blocks until every child has exited; it is bounded by the
// children themselves plus two grace periods once one fails or an interrupt
// arrives (or when `timeout` passes, which fails the group with a message);
// a frozen lone holdout ends it within a loop turn (100 ms) of the last
// other child's exit.
// Call it from one thread; it changes no global state except reaping its
// children (it installs no signal handler: the caller does).
#ifndef ONEFLOW_LITE_COMM_LAUNCH_PROCESS_GROUP_H_
#define ONEFLOW_LITE_COMM_LAUNCH_PROCESS_GROUP_H_

#include <atomic>
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
  // CPUs the child is bound to before it execs (cpu_binding.h); empty: it
  // inherits the launcher's affinity.
  std::vector<int> cpus;
  // For a child that runs the rank elsewhere (`oflite launch --hosts`: ssh
  // or another remote shell, which forward no signal): its stdin is a pipe
  // the group holds, and every signal but SIGKILL reaches it as one line
  // naming the signal ("TERM\n", "INT\n") written into that pipe, which the
  // group then closes. The far side's controlling shell passes the signal
  // to the rank, and ends the rank when the pipe reaches end-of-file for
  // any other reason (the launcher died, the connection broke). SIGKILL
  // still goes to the local process group (the remote shell, ssh...).
  // Otherwise the child inherits the launcher's stdin.
  bool signal_by_stdin = false;
};

struct ProcessGroupOptions {
  std::chrono::milliseconds grace{5000};
  std::chrono::milliseconds timeout{std::chrono::hours(24 * 365)};
  FILE* output = stdout;
  // The exit code of a rank ended only because another rank failed
  // (oflite's kExitPeerFailed); -1: no such convention.
  int peer_failed_exit_code = -1;
  // Read every loop turn (at most 100 ms apart); a non-zero value is the
  // signal to forward. Not owned; may be written from a signal handler
  // (std::atomic<int> is lock-free). Null: no interrupts.
  const std::atomic<int>* interrupt = nullptr;
};

// How one child ended.
struct RankOutcome {
  int exit_code = 0;           // its exit status, or 128 + signal
  bool signaled = false;       // ended by a signal
  bool stopped_by_us = false;  // the group had signalled it before it ended
  bool frozen = false;         // it was stopped (SIGSTOP...) when it ended
  // Every other child had exited with peer_failed_exit_code, and the group
  // killed this one with SIGKILL (frozen, or it outlived SIGTERM): the rank
  // the others lost. Blamed before them (file comment).
  bool lost_by_peers = false;
  int exit_order = -1;  // 0 for the first child to exit, 1 for the next...
  std::string cause;    // its last error line (see the file comment)
};

struct ProcessGroupResult {
  bool ok = true;
  int failed_rank = -1;  // the blamed rank (the first cause), -1 if none
  int exit_code = 0;     // its exit code, or 128 + signal
  std::string message;   // e.g. "rank 1 exited with code 3; stopped the others"
  std::string cause;     // the blamed rank's last error line ("" if none)
  int interrupted_by = 0;  // the signal forwarded from *interrupt, 0 if none
  std::vector<RankOutcome> ranks;  // by rank
};

// The rank to blame among `outcomes` by the rules of the file comment, or
// -1 when every rank exited 0. Pure; exposed for tests.
int BlamedRank(const std::vector<RankOutcome>& outcomes, int peer_failed_exit_code);

// Non-OK only when a child cannot be started (e.g. fork/pipe failure).
StatusOr<ProcessGroupResult> RunProcessGroup(
    const std::vector<RankProcess>& ranks, const ProcessGroupOptions& options);

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_LAUNCH_PROCESS_GROUP_H_
