#include "oneflow_lite/comm/testing/listener_flood.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace oflite {
namespace comm {
namespace testing {
namespace {

std::string ProcPath(pid_t pid, const std::string& leaf) {
  return "/proc/" + (pid == 0 ? std::string("self") : std::to_string(pid)) + "/" + leaf;
}

int64_t StatusField(pid_t pid, const std::string& name) {
  std::ifstream in(ProcPath(pid, "status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, name.size(), name) == 0) {
      return std::stoll(line.substr(name.size()));
    }
  }
  return -1;
}

// Reads one byte from `fd` within `bound`; -1 on timeout or error.
int ReadByte(int fd, std::chrono::milliseconds bound) {
  pollfd poll_fd{fd, POLLIN, 0};
  if (::poll(&poll_fd, 1, static_cast<int>(bound.count())) != 1) return -1;
  unsigned char byte = 0;
  return ::read(fd, &byte, 1) == 1 ? byte : -1;
}

[[noreturn]] void RunChild(int limit, const StarvedServer::StartFn& start, int in, int out) {
  rlimit rl{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(3);
  std::shared_ptr<void> keep;
  const int port = start(&keep);
  if (port <= 0) _exit(4);
  std::vector<int> fillers;
  while (true) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    fillers.push_back(fd);
  }
  if (::write(out, &port, sizeof(port)) != sizeof(port)) _exit(5);
  while (true) {
    unsigned char command = 0;
    if (::read(in, &command, 1) != 1 || command == 'q') break;
    if (command == 'r') {
      for (int fd : fillers) ::close(fd);
      fillers.clear();
      const unsigned char done = 'd';
      if (::write(out, &done, 1) != 1) break;
    }
  }
  keep.reset();
  _exit(0);
}

}  // namespace

int OpenDescriptors(pid_t pid) {
  DIR* dir = ::opendir(ProcPath(pid, "fd").c_str());
  if (dir == nullptr) return -1;
  int count = 0;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - (pid == 0 ? 1 : 0);  // the directory stream itself
}

int64_t ResidentBytes(pid_t pid) { return StatusField(pid, "VmRSS:") * 1024; }

int ThreadCount(pid_t pid) { return static_cast<int>(StatusField(pid, "Threads:")); }

double CpuSeconds(pid_t pid) {
  std::ifstream in(ProcPath(pid, "stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  long long user = 0, system = 0;
  // Fields after the name start at 3 (state); utime is 14, stime 15.
  for (int index = 3; index <= 15 && (fields >> field); ++index) {
    if (index == 14) user = std::stoll(field);
    if (index == 15) system = std::stoll(field);
  }
  return static_cast<double>(user + system) / sysconf(_SC_CLK_TCK);
}

CpuAgainstSpinner MeasureCpuAgainstSpinner(pid_t pid, std::chrono::milliseconds window) {
  CpuAgainstSpinner result;
  const double before = CpuSeconds(pid);
  std::thread spinner([&] {
    const auto end = std::chrono::steady_clock::now() + window;
    while (std::chrono::steady_clock::now() < end) (void)::getppid();
    timespec used{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &used);
    result.spinner = used.tv_sec + used.tv_nsec * 1e-9;
  });
  spinner.join();
  result.process = CpuSeconds(pid) - before;
  return result;
}

int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool ClosedByPeer(int fd, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  char buffer[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd poll_fd{fd, POLLIN, 0};
    if (::poll(&poll_fd, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

bool StillOpen(int fd) {
  pollfd poll_fd{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&poll_fd, 1, 0) == 0) return true;
  return (poll_fd.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0;
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) {
    if (fd >= 0) ::close(fd);
  }
  fds->clear();
}

std::unique_ptr<StarvedServer> StarvedServer::Start(int limit, StartFn start) {
  int down[2], up[2];
  if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0) return nullptr;
  const pid_t pid = ::fork();
  if (pid < 0) return nullptr;
  if (pid == 0) {
    ::close(down[1]);
    ::close(up[0]);
    RunChild(limit, start, down[0], up[1]);
  }
  ::close(down[0]);
  ::close(up[1]);
  std::unique_ptr<StarvedServer> server(new StarvedServer());
  server->pid_ = pid;
  server->to_child_ = down[1];
  server->from_child_ = up[0];
  pollfd poll_fd{up[0], POLLIN, 0};
  int port = 0;
  if (::poll(&poll_fd, 1, 30000) != 1 ||
      ::read(up[0], &port, sizeof(port)) != sizeof(port)) {
    return nullptr;  // the destructor reaps the child
  }
  server->port_ = port;
  return server;
}

bool StarvedServer::ReleaseDescriptors() {
  const unsigned char command = 'r';
  if (::write(to_child_, &command, 1) != 1) return false;
  return ReadByte(from_child_, std::chrono::milliseconds(30000)) == 'd';
}

StarvedServer::~StarvedServer() {
  const unsigned char command = 'q';
  (void)!::write(to_child_, &command, 1);
  ::close(to_child_);
  int status = 0;
  for (int i = 0; i < 300; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      ::close(from_child_);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  ::close(from_child_);
}

std::string FloodAtDescriptorLimit(StarvedServer* server, const std::string& what) {
  std::vector<int> flood;
  for (int i = 0; i < 20; ++i) flood.push_back(ConnectLoopback(server->port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const CpuAgainstSpinner cpu =
      MeasureCpuAgainstSpinner(server->pid(), std::chrono::milliseconds(2000));
  CloseAll(&flood);
  std::string problem;
  // Spinning on accept() would take about the spinner's share of a core.
  if (!(cpu.process < 0.2 * cpu.spinner + 0.05)) {
    problem = what + " used " + std::to_string(cpu.process) +
              " s of CPU at its fd limit while a spinning thread got " +
              std::to_string(cpu.spinner) + " s";
  }
  if (!server->ReleaseDescriptors()) problem += (problem.empty() ? "" : "; ") + what +
                                                " did not release its filler descriptors";
  return problem;
}

}  // namespace testing
}  // namespace comm
}  // namespace oflite
