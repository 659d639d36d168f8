#include "oneflow_lite/comm/launch/process_group.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <thread>

namespace oflite {
namespace comm {
namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int output_fd = -1;  // read end of the merged stdout/stderr pipe
  int control_fd = -1;  // write end of its stdin pipe (RankProcess::signal_by_stdin)
  std::string partial_line;
  std::string last_line;
  std::string last_error_line;
  bool exited = false;
  bool frozen = false;   // stopped by a signal (SIGSTOP, SIGTSTP...) and not continued
  bool holdout = false;  // the group signalled it as the lone holdout (LoneHoldout)
  int signal_sent = 0;   // the last signal the group sent it (0: none)
  RankOutcome outcome;
};

StatusOr<Child> StartChild(int rank, const RankProcess& process) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return UnavailableError("rank ", rank, ": pipe: ", strerror(errno));
  }
  // Close-on-exec on both ends: no other child may hold this one's stdin
  // open, or its end-of-file would never come.
  int control_fds[2] = {-1, -1};
  if (process.signal_by_stdin && ::pipe2(control_fds, O_CLOEXEC) != 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return UnavailableError("rank ", rank, ": pipe: ", strerror(errno));
  }
  auto close_all = [&] {
    for (int fd : {pipe_fds[0], pipe_fds[1], control_fds[0], control_fds[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  std::vector<char*> argv;
  for (const auto& arg : process.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  // Built before fork: the child only makes system calls until exec.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : process.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      close_all();
      return InvalidArgumentError("rank ", rank, ": CPU ", cpu, " is out of range");
    }
    CPU_SET(cpu, &cpus);
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    close_all();
    return UnavailableError("rank ", rank, ": fork: ", strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    if (control_fds[0] >= 0) ::dup2(control_fds[0], STDIN_FILENO);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    for (const auto& entry : process.environment) {
      ::putenv(const_cast<char*>(entry.c_str()));
    }
    if (!process.cpus.empty() && ::sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      std::fprintf(stderr, "cannot bind rank %d to its CPUs: %s\n", rank, strerror(errno));
      ::_exit(127);
    }
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  ::close(pipe_fds[1]);
  if (control_fds[0] >= 0) ::close(control_fds[0]);
  Child child;
  child.pid = pid;
  child.output_fd = pipe_fds[0];
  child.control_fd = control_fds[1];
  return child;
}

// An error line: what oflite prints on failure ("oflite run: ..."), a glog
// ERROR/FATAL line ("E1201 12:00:00..."), or a line saying error/failed.
bool IsErrorLine(const std::string& line) {
  if (line.rfind("oflite ", 0) == 0) return true;
  if (line.size() > 5 && (line[0] == 'E' || line[0] == 'F') &&
      std::all_of(line.begin() + 1, line.begin() + 5, [](char c) { return std::isdigit(c); })) {
    return true;
  }
  return line.find("rror") != std::string::npos || line.find("failed") != std::string::npos;
}

void PrintLine(int rank, Child* child, const std::string& line, FILE* out) {
  std::fprintf(out, "[rank %d] %s\n", rank, line.c_str());
  child->last_line = line;
  if (IsErrorLine(line)) child->last_error_line = line;
}

void EmitLines(int rank, Child* child, const char* data, size_t size, FILE* out,
               bool flush_partial) {
  child->partial_line.append(data, size);
  size_t start = 0;
  while (true) {
    size_t end = child->partial_line.find('\n', start);
    if (end == std::string::npos) break;
    PrintLine(rank, child, child->partial_line.substr(start, end - start), out);
    start = end + 1;
  }
  child->partial_line.erase(0, start);
  if (flush_partial && !child->partial_line.empty()) {
    PrintLine(rank, child, child->partial_line, out);
    child->partial_line.clear();
  }
  std::fflush(out);
}

// Reads whatever is available from every open pipe (waiting up to 100 ms).
void PumpOutput(std::vector<Child>* children, FILE* out) {
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (size_t rank = 0; rank < children->size(); ++rank) {
    if ((*children)[rank].output_fd >= 0) {
      fds.push_back({(*children)[rank].output_fd, POLLIN, 0});
      ranks.push_back(static_cast<int>(rank));
    }
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return;
  }
  if (::poll(fds.data(), fds.size(), 100) <= 0) return;  // EINTR: a signal; next turn
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Child& child = (*children)[ranks[i]];
    char buffer[4096];
    ssize_t n = ::read(child.output_fd, buffer, sizeof(buffer));
    if (n > 0) {
      EmitLines(ranks[i], &child, buffer, n, out, false);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      EmitLines(ranks[i], &child, "", 0, out, true);
      ::close(child.output_fd);
      child.output_fd = -1;
    }
  }
}

// Writes `text` into a pipe whose reader may be gone, without the SIGPIPE
// that would kill the launcher: blocked in this thread around the write,
// and taken off the pending set if the write raised it.
void WriteIgnoringPipe(int fd, const std::string& text) {
  sigset_t pipe_only, previous, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &previous);
  ssize_t written;
  do {
    written = ::write(fd, text.data(), text.size());
  } while (written < 0 && errno == EINTR);
  if (written < 0 && errno == EPIPE && !was_pending) {
    const timespec no_wait = {0, 0};
    ::sigtimedwait(&pipe_only, nullptr, &no_wait);
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

// The name `kill -s` takes for a signal forwarded through a control pipe.
std::string SignalName(int signal_number) {
  switch (signal_number) {
    case SIGINT: return "INT";
    case SIGHUP: return "HUP";
    case SIGQUIT: return "QUIT";
    default: return "TERM";
  }
}

// How long the group waits after a rank fails before stopping the others.
constexpr std::chrono::milliseconds kSettle{200};

// The blame class of a failed child (lower is blamed first).
int BlameClass(const RankOutcome& outcome, int peer_failed_exit_code) {
  if (outcome.stopped_by_us) return outcome.lost_by_peers ? 2 : 4;
  if (outcome.signaled) return 0;
  return outcome.exit_code == peer_failed_exit_code ? 3 : 1;
}

// The loop of RunProcessGroup: output, reaping, stopping (file comment).
class GroupRunner {
 public:
  GroupRunner(std::vector<Child> children, const ProcessGroupOptions& options)
      : children_(std::move(children)), options_(options),
        deadline_(Clock::now() + options.timeout) {}

  ProcessGroupResult Run() {
    while (!AllDone()) {
      PumpOutput(&children_, options_.output);
      Reap();
      Stop(Clock::now());
    }
    for (Child& child : children_) {
      if (child.control_fd >= 0) ::close(child.control_fd);
      child.control_fd = -1;
    }
    return Result();
  }

 private:
  bool AllDone() const {
    for (const Child& child : children_) {
      if (!child.exited || child.output_fd >= 0) return false;
    }
    return true;
  }

  void Reap() {
    const Clock::time_point now = Clock::now();
    for (Child& child : children_) {
      int status = 0;
      if (child.exited ||
          ::waitpid(child.pid, &status, WNOHANG | WUNTRACED | WCONTINUED) != child.pid) {
        continue;
      }
      if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
        child.frozen = WIFSTOPPED(status);
        continue;
      }
      child.exited = true;
      if (child.control_fd >= 0) {  // its far side is done: let its watcher go
        ::close(child.control_fd);
        child.control_fd = -1;
      }
      RankOutcome& outcome = child.outcome;
      outcome.signaled = WIFSIGNALED(status);
      outcome.exit_code = outcome.signaled ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      outcome.exit_order = exits_++;
      outcome.frozen = child.frozen;
      // Signalled by us, unless it died of a signal we never sent (a kill -9
      // from outside that we reaped only after stopping the group).
      outcome.stopped_by_us = child.signal_sent != 0 &&
                              !(outcome.signaled && WTERMSIG(status) != child.signal_sent);
      // The one the others lost: it could not end on its own (frozen) or
      // outlived SIGTERM and the grace period.
      outcome.lost_by_peers =
          child.holdout && outcome.stopped_by_us && outcome.signaled && WTERMSIG(status) == SIGKILL;
      if (outcome.exit_code == 0) continue;
      // A healthy rank ended by a peer's failure: give the others time to
      // exit on their own (and report) before stopping them.
      const bool peer_failed = !outcome.signaled &&
                               outcome.exit_code == options_.peer_failed_exit_code;
      // Any other failure: a short settling time, so that ranks failing at
      // the same moment are reaped as failures rather than stopped by us.
      const auto settle = std::min<Clock::duration>(options_.grace, kSettle);
      stop_at_ = std::min(stop_at_, now + (peer_failed ? options_.grace : settle));
    }
  }

  // The one child still running when every other child has exited with
  // the peer-failed code (each lost a peer: this one), or null.
  Child* LoneHoldout() {
    if (options_.peer_failed_exit_code < 0 || children_.size() < 2) return nullptr;
    Child* running = nullptr;
    for (Child& child : children_) {
      if (!child.exited) {
        if (running != nullptr) return nullptr;
        running = &child;
      } else if (child.outcome.signaled || child.outcome.stopped_by_us ||
                 child.outcome.exit_code != options_.peer_failed_exit_code) {
        return nullptr;
      }
    }
    return running;
  }

  // Signals the child's process group. A frozen child cannot act on any
  // other signal until continued, so it gets SIGKILL.
  void Signal(Child* child, int signal_number) {
    if (!child->exited) {
      if (child->frozen) signal_number = SIGKILL;
      if (child == LoneHoldout()) child->holdout = true;
      child->signal_sent = signal_number;
    }
    if (child->control_fd >= 0 && signal_number != SIGKILL) {
      WriteIgnoringPipe(child->control_fd, SignalName(signal_number) + "\n");
      ::close(child->control_fd);
      child->control_fd = -1;
      return;
    }
    ::kill(-child->pid, signal_number);
  }

  // Signals the process group of every child still running, and of every
  // exited child whose group still holds its output open (what it started).
  void SignalRunning(int signal_number) {
    for (Child& child : children_) {
      if (child.exited && child.output_fd < 0) continue;
      Signal(&child, signal_number);
    }
  }

  void Stop(Clock::time_point now) {
    const int interrupt = options_.interrupt != nullptr ? options_.interrupt->load() : 0;
    if (interrupt != 0 && interrupted_by_ == 0) {
      interrupted_by_ = interrupt;
      SignalRunning(interrupt);
      signalled_ = true;
      kill_at_ = now + options_.grace;
    }
    if (now >= deadline_ && !timed_out_) {
      timed_out_ = true;
      stop_at_ = now;
    }
    if (!signalled_ && now >= stop_at_) {
      SignalRunning(SIGTERM);
      signalled_ = true;
      kill_at_ = now + options_.grace;
    }
    if (signalled_ && now >= kill_at_) SignalRunning(SIGKILL);
    // Every other rank exited saying a peer failed and this one is frozen:
    // it is the one they lost and will never report; no grace to wait out.
    Child* holdout = LoneHoldout();
    if (holdout != nullptr && holdout->frozen && holdout->signal_sent != SIGKILL) {
      Signal(holdout, SIGKILL);
    }
  }

  ProcessGroupResult Result() {
    ProcessGroupResult result;
    bool stopped_others = false;
    for (Child& child : children_) {
      if (!child.outcome.signaled) {
        child.outcome.cause =
            child.last_error_line.empty() ? child.last_line : child.last_error_line;
      }
      result.ranks.push_back(child.outcome);
    }
    const int blamed = BlamedRank(result.ranks, options_.peer_failed_exit_code);
    for (size_t rank = 0; rank < children_.size(); ++rank) {
      if (static_cast<int>(rank) != blamed && children_[rank].outcome.stopped_by_us) {
        stopped_others = true;
      }
    }
    result.interrupted_by = interrupted_by_;
    if (interrupted_by_ != 0) {
      result.ok = false;
      result.message = "interrupted by signal " + std::to_string(interrupted_by_) + " (" +
                       strsignal(interrupted_by_) + "); forwarded it to every rank";
      return result;
    }
    if (timed_out_ && (blamed < 0 || result.ranks[blamed].stopped_by_us)) {
      result.ok = false;
      result.message = "the job did not finish within the launch timeout";
      return result;
    }
    if (blamed < 0) return result;
    const RankOutcome& outcome = children_[blamed].outcome;
    result.ok = false;
    result.failed_rank = blamed;
    result.exit_code = outcome.exit_code;
    result.cause = outcome.cause;
    result.message = "rank " + std::to_string(blamed) + " " + Describe(outcome);
    if (stopped_others) result.message += "; stopped the others";
    return result;
  }

  // How `outcome` ended, after "rank R ".
  std::string Describe(const RankOutcome& outcome) const {
    if (outcome.lost_by_peers) {
      return std::string(outcome.frozen ? "was frozen (stopped by a signal)"
                                        : "kept running and ignored SIGTERM") +
             " after every other rank exited with code " +
             std::to_string(options_.peer_failed_exit_code) + " (a peer failed); killed it";
    }
    if (outcome.signaled) return "was killed by signal " + std::to_string(outcome.exit_code - 128);
    return "exited with code " + std::to_string(outcome.exit_code);
  }

  std::vector<Child> children_;
  const ProcessGroupOptions& options_;
  const Clock::time_point deadline_;
  Clock::time_point stop_at_ = Clock::time_point::max();
  Clock::time_point kill_at_{};
  bool signalled_ = false;
  bool timed_out_ = false;
  int interrupted_by_ = 0;
  int exits_ = 0;
};

}  // namespace

int BlamedRank(const std::vector<RankOutcome>& outcomes, int peer_failed_exit_code) {
  int blamed = -1;
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    const RankOutcome& outcome = outcomes[rank];
    if (outcome.exit_code == 0) continue;
    if (blamed >= 0) {
      const RankOutcome& best = outcomes[blamed];
      if (std::make_pair(BlameClass(outcome, peer_failed_exit_code), outcome.exit_order) >=
          std::make_pair(BlameClass(best, peer_failed_exit_code), best.exit_order)) {
        continue;
      }
    }
    blamed = static_cast<int>(rank);
  }
  return blamed;
}

StatusOr<ProcessGroupResult> RunProcessGroup(const std::vector<RankProcess>& ranks,
                                             const ProcessGroupOptions& options) {
  std::vector<Child> children;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    auto child = StartChild(static_cast<int>(rank), ranks[rank]);
    if (!child.ok()) {
      for (Child& started : children) ::kill(-started.pid, SIGKILL);
      for (Child& started : children) {
        ::waitpid(started.pid, nullptr, 0);
        for (int fd : {started.output_fd, started.control_fd}) {
          if (fd >= 0) ::close(fd);
        }
      }
      return child.status();
    }
    children.push_back(std::move(*child));
  }
  return GroupRunner(std::move(children), options).Run();
}

}  // namespace comm
}  // namespace oflite
