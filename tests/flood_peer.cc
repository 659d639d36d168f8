// A hostile peer for tests/flood_test.sh: floods a port on 127.0.0.1 with
// connections that never prove a job token.
//
//   flood_peer PORT MODE COUNT [HOLD_MS]
//
// MODE: connect-close (connect, close at once); control-header (a control
// JOIN header claiming a 16 MiB payload, then wait for the server to close,
// bounded by HOLD_MS); data-garbage (a 48-byte non-frame, likewise);
// idle (COUNT connections that send nothing, held open HOLD_MS, then
// closed). Prints one summary line; exit 0 unless the arguments are wrong.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/control/control_wire.h"
#include "oneflow_lite/comm/testing/listener_flood.h"
#include "oneflow_lite/comm/wire.h"

namespace {

// Waits up to `hold_ms` for the server to close `fd`; true if it did.
bool WaitClosed(int fd, int hold_ms) {
  char buffer[512];
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(hold_ms);
  do {
    pollfd poll_fd{fd, POLLIN, 0};
    if (::poll(&poll_fd, 1, hold_ms > 0 ? 50 : 0) <= 0) continue;
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got <= 0) return true;
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

std::string ControlHeader() {
  using namespace oflite::comm;
  std::string header;
  wire::AppendU32(&header, control::kControlMagic);
  wire::AppendU16(&header, control::kControlVersion);
  wire::AppendU16(&header, static_cast<uint16_t>(control::ControlType::kJoin));
  wire::AppendU32(&header, control::kMaxControlPayload - 1);
  wire::AppendU32(&header, 0);
  return header;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: flood_peer PORT MODE COUNT [HOLD_MS]\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string mode = argv[2];
  const int count = std::atoi(argv[3]);
  const int hold_ms = argc > 4 ? std::atoi(argv[4]) : 2000;
  std::string payload;
  if (mode == "control-header") payload = ControlHeader();
  if (mode == "data-garbage") payload.assign(48, '\x5a');
  if (port <= 0 || count < 0 ||
      (payload.empty() && mode != "connect-close" && mode != "idle")) {
    std::fprintf(stderr, "flood_peer: bad arguments\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  int connected = 0, closed_by_server = 0;
  std::vector<int> held;
  for (int i = 0; i < count; ++i) {
    const int fd = oflite::comm::testing::ConnectLoopback(port);
    if (fd < 0) continue;
    ++connected;
    if (mode == "idle") {
      held.push_back(fd);
      continue;
    }
    if (!payload.empty()) {
      (void)!::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL);
      closed_by_server += WaitClosed(fd, hold_ms) ? 1 : 0;
    }
    ::close(fd);
  }
  if (!held.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
    for (int fd : held) {
      closed_by_server += WaitClosed(fd, 0) ? 1 : 0;
      ::close(fd);
    }
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  std::printf("flood_peer %s port %d: %d of %d connected, %d closed by the server, %lld ms\n",
              mode.c_str(), port, connected, count, closed_by_server,
              static_cast<long long>(elapsed.count()));
  return 0;
}
