// A CommNet rank in its own process, for the multi-process tests
// (multiprocess_test.cc). Modes:
//   --mode=serve      join, connect, register a 1 MiB buffer (byte i =
//                     rank + i), publish it as "buffer", echo messages on
//                     channel 1, then wait for key "release" (or a kill).
//   --mode=allreduce  join, connect, all-reduce int64 (rank + 1) * i over
//                     --count elements, check the sums, exit 0 if right.
//   --mode=intruder   dial the master with a wrong job token; exit 0 if it
//                     is refused with PERMISSION_DENIED.
// Flags: --master=HOST:PORT --rank=R --world=N --token=T --count=C
//        --comm=tcp|shm|ibverbs_emu (the transport provider; ibverbs_emu:
//        the ibverbs provider on the cross-process verbs emulator's fabric
//        --fabric=NAME)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "oneflow_lite/comm/collective/ring.h"
#include "oneflow_lite/comm/control/connect.h"
#include "oneflow_lite/comm/ibverbs/emulated_transport.h"
#include "oneflow_lite/comm/shm/shm_transport.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"

namespace oflite {
namespace comm {
namespace {

std::string Flag(int argc, char** argv, const std::string& name,
                 const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return argv[i] + prefix.size();
    }
  }
  return fallback;
}

int Fail(const Status& status, const char* what) {
  std::fprintf(stderr, "comm_peer: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  const std::string mode = Flag(argc, argv, "mode", "serve");
  control::ControlClientOptions client_options;
  client_options.master = Flag(argc, argv, "master", "127.0.0.1:1");
  client_options.rank = std::atoi(Flag(argc, argv, "rank", "1").c_str());
  client_options.world_size = std::atoi(Flag(argc, argv, "world", "2").c_str());
  client_options.job_token = Flag(argc, argv, "token", "");
  client_options.connect_timeout = std::chrono::milliseconds(10000);
  auto control = control::ControlClient::Connect(client_options);
  if (mode == "intruder") {
    if (control.ok()) return 1;
    std::fprintf(stderr, "comm_peer: refused as expected: %s\n",
                 control.status().ToString().c_str());
    return control.status().code() == StatusCode::kPermissionDenied ? 0 : 1;
  }
  if (!control.ok()) return Fail(control.status(), "join");
  MessageRouter router;
  Connection* echo_to = nullptr;
  TransportOptions options;
  options.rank = client_options.rank;
  options.world_size = client_options.world_size;
  options.on_message = router.AsHandler();
  StatusOr<std::unique_ptr<Transport>> transport = InvalidArgumentError("--comm");
  const std::string comm = Flag(argc, argv, "comm", "tcp");
  if (comm == "ibverbs_emu") {
    transport = ibverbs::JoinedIbverbsCreator(Flag(argc, argv, "fabric", ""))(options);
  } else if (comm == "shm") {
    auto created = shm::CreateShmTransport(options, shm::ShmOptions());
    if (created.ok()) transport = std::unique_ptr<Transport>(std::move(*created));
    else transport = created.status();
  } else {
    tcp::TcpOptions tcp_options;
    tcp_options.job_token = client_options.job_token;
    transport = tcp::CreateTcpTransport(options, tcp_options);
  }
  if (!transport.ok()) return Fail(transport.status(), "transport");
  Status connected = control::ConnectTransport(transport->get(), control->get(), "comm",
                                               std::chrono::milliseconds(20000));
  if (!connected.ok()) return Fail(connected, "connect");
  echo_to = *(*transport)->GetConnection(0);
  // Registered only now: a ping that arrived before echo_to was known was
  // parked by the router and is delivered here (it used to be dropped, and
  // the handler read echo_to while this thread wrote it; tsan saw the race).
  router.SetHandler(1, [echo_to](int, const void* data, size_t size) {
    MessageRouter::Send(echo_to, 1, std::string(static_cast<const char*>(data), size))
        .IgnoreError();
  });
  if (mode == "allreduce") {
    const size_t count = std::atoll(Flag(argc, argv, "count", "1000").c_str());
    CommStats stats;
    auto pool = RegisteredPool::Create(transport->get(), RegisteredPoolOptions(), &stats.pool);
    if (!pool.ok()) return Fail(pool.status(), "pool");
    auto ring = RingCommunicator::Create(transport->get(), &router, pool->get(),
                                         CollectiveOptions());
    if (!ring.ok()) return Fail(ring.status(), "ring");
    std::vector<int64_t> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = (options.rank + 1) * static_cast<int64_t>(i);
    auto region = (*transport)->RegisterMemory(data.data(), count * 8, kAccessAll);
    Status reduced = (*ring)->AllReduce(**region, 0, count, DT_INT64,
                                        DeadlineAfter(std::chrono::milliseconds(20000)));
    if (!reduced.ok()) return Fail(reduced, "all-reduce");
    const int64_t world = options.world_size;
    for (size_t i = 0; i < count; ++i) {
      if (data[i] != world * (world + 1) / 2 * static_cast<int64_t>(i)) {
        std::fprintf(stderr, "comm_peer: rank %d element %zu wrong\n", options.rank, i);
        return 1;
      }
    }
    Status done = (*control)->Barrier("allreduce-done", std::chrono::milliseconds(20000));
    ring->reset();
    region->reset();
    return done.ok() ? 0 : Fail(done, "barrier");
  }
  std::vector<uint8_t> buffer(1 << 20);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<uint8_t>(options.rank + i);
  auto region = (*transport)->RegisterMemory(buffer.data(), buffer.size(), kAccessAll);
  if (!region.ok()) return Fail(region.status(), "register");
  Status published = control::PublishRemoteKey(control->get(), "buffer", (*region)->remote_key());
  if (!published.ok()) return Fail(published, "publish");
  auto released = (*control)->Get("release", std::chrono::milliseconds(60000), 0);
  region->reset();
  return released.ok() ? 0 : Fail(released.status(), "waiting for release");
}

}  // namespace
}  // namespace comm
}  // namespace oflite

int main(int argc, char** argv) { return oflite::comm::Main(argc, argv); }
