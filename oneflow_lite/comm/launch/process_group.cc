#include "oneflow_lite/comm/launch/process_group.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace oflite {
namespace comm {
namespace {

struct Child {
  pid_t pid = -1;
  int output_fd = -1;  // read end of the merged stdout/stderr pipe
  std::string partial_line;
  bool exited = false;
  int exit_code = 0;
};

StatusOr<Child> StartChild(int rank, const RankProcess& process) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return UnavailableError("rank ", rank, ": pipe: ", strerror(errno));
  }
  std::vector<char*> argv;
  for (const auto& arg : process.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return UnavailableError("rank ", rank, ": fork: ", strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    for (const auto& entry : process.environment) {
      ::putenv(const_cast<char*>(entry.c_str()));
    }
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  ::close(pipe_fds[1]);
  Child child;
  child.pid = pid;
  child.output_fd = pipe_fds[0];
  return child;
}

void EmitLines(int rank, Child* child, const char* data, size_t size, FILE* out,
               bool flush_partial) {
  child->partial_line.append(data, size);
  size_t start = 0;
  while (true) {
    size_t end = child->partial_line.find('\n', start);
    if (end == std::string::npos) break;
    std::fprintf(out, "[rank %d] %.*s\n", rank, static_cast<int>(end - start),
                 child->partial_line.data() + start);
    start = end + 1;
  }
  child->partial_line.erase(0, start);
  if (flush_partial && !child->partial_line.empty()) {
    std::fprintf(out, "[rank %d] %s\n", rank, child->partial_line.c_str());
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
  if (::poll(fds.data(), fds.size(), 100) <= 0) return;
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

void Reap(std::vector<Child>* children) {
  for (Child& child : *children) {
    if (child.exited) continue;
    int status = 0;
    if (::waitpid(child.pid, &status, WNOHANG) == child.pid) {
      child.exited = true;
      child.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
  }
}

void SignalAll(std::vector<Child>* children, int signal_number) {
  for (Child& child : *children) {
    if (!child.exited) ::kill(-child.pid, signal_number);
  }
}

}  // namespace

StatusOr<ProcessGroupResult> RunProcessGroup(const std::vector<RankProcess>& ranks,
                                             const ProcessGroupOptions& options) {
  std::vector<Child> children;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    auto child = StartChild(static_cast<int>(rank), ranks[rank]);
    if (!child.ok()) {
      SignalAll(&children, SIGKILL);
      for (Child& started : children) ::waitpid(started.pid, nullptr, 0);
      return child.status();
    }
    children.push_back(std::move(*child));
  }
  ProcessGroupResult result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::chrono::steady_clock::time_point kill_at{};
  bool stopping = false;
  while (true) {
    PumpOutput(&children, options.output);
    Reap(&children);
    bool all_done = true;
    for (size_t rank = 0; rank < children.size(); ++rank) {
      const Child& child = children[rank];
      if (!child.exited || child.output_fd >= 0) all_done = false;
      if (child.exited && child.exit_code != 0 && result.ok) {
        result.ok = false;
        result.failed_rank = static_cast<int>(rank);
        result.exit_code = child.exit_code;
        result.message = "rank " + std::to_string(rank) +
                         (child.exit_code > 128
                              ? " was killed by signal " + std::to_string(child.exit_code - 128)
                              : " exited with code " + std::to_string(child.exit_code));
      }
    }
    if (all_done) break;
    const auto now = std::chrono::steady_clock::now();
    if (result.ok && now >= deadline) {
      result.ok = false;
      result.message = "the job did not finish within the launch timeout";
    }
    if (!result.ok && !stopping) {
      stopping = true;
      SignalAll(&children, SIGTERM);
      kill_at = now + options.grace;
    }
    if (stopping && now >= kill_at) SignalAll(&children, SIGKILL);
  }
  if (!result.ok && result.failed_rank >= 0) result.message += "; stopped the others";
  return result;
}

}  // namespace comm
}  // namespace oflite
