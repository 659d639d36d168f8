// Point-to-point bandwidth and small-message latency of CommNet between two
// processes, once per provider (--comm, default tcp then shm), next to a raw
// blocking-socket loop and iperf3 (one TCP stream, `-l` = the size) in the
// same run. OpenMPI's shared-memory transport,
// the peer of shm, is a separate program (tools/bench/mpi_allreduce_bench.sh
// runs its ping-pong too).
//
//   bazel run -c opt //tools/bench:comm_p2p_bench -- [--repeats=5]
//       [--min_bytes=4096] [--max_bytes=67108864] [--latency_iterations=20000]
//       [--comm=tcp,shm] [--shm_spin_us=N]
//       [--shm_inline_bytes=N] [--iperf3=0|1] [--help: every flag]
//
// Bandwidth: rank 0 moves `total` bytes (at least 32 MiB per sample) to rank
// 1 in transfers of each size: raw = send() loop into recv(), CommNet =
// one-sided WRITE (and READ) with a window of outstanding operations, into a
// registered buffer. Latency: ping-pong of 8-byte messages in blocks
// interleaved with the raw loop's blocks (blocking and spinning recv), the
// median of the blocks' median round trips, and rank 0's CPU time per round
// trip (user + system, all threads: load from other jobs disturbs it far
// less than wall time). Every figure is
// the median over --repeats samples; raw, CommNet and iperf3 samples
// alternate so that all see the same (shared, busy) machine.
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "oneflow_lite/comm/control/connect.h"
#include "oneflow_lite/comm/control/rendezvous_server.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/comm_bench_util.h"
#include "tools/bench/iperf3_peer.h"

namespace oflite {
namespace bench {
namespace {

using comm::Clock;
using std::chrono::milliseconds;

// After "usage: ... <program>" in --help.
constexpr char kUsage[] =
    "[flags]\n\nCommNet point-to-point (WRITE/READ throughput, 8-byte round trip) over each "
    "provider\nnext to a raw socket loop, 2 processes on this host.";

struct Config {
  int repeats = 0;
  size_t min_bytes = 0;
  size_t max_bytes = 0;
  int latency_iterations = 0;
  int control_port = 0;
  int raw_port = 0;
  std::string provider;
  comm::shm::ShmOptions shm;
  bool iperf3 = false;
};

// Round trips per latency block: --latency_iterations over --repeats blocks.
int LatencyBlock(const Config& config) {
  return std::max(1, config.latency_iterations / std::max(1, config.repeats));
}

size_t TotalFor(size_t size) {
  return std::min<size_t>(std::max<size_t>(size * 16, 32u << 20), 256u << 20) / size * size;
}

std::vector<size_t> Sizes(const Config& config) {
  std::vector<size_t> sizes;
  for (size_t size = config.min_bytes; size <= config.max_bytes; size *= 4) sizes.push_back(size);
  return sizes;
}

void Check(const Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

// ---------------------------------------------------------------- raw loop

int RawConnect(int rank, const Config& config) {
  const auto deadline = comm::DeadlineAfter(milliseconds(30000));
  int fd;
  if (rank == 0) {
    int port = config.raw_port;
    auto listener = comm::ListenTcp("127.0.0.1", &port);
    Check(listener.status(), "raw listen");
    auto accepted = comm::AcceptTcp(*listener, deadline);
    Check(accepted.status(), "raw accept");
    fd = *accepted;
    ::close(*listener);
  } else {
    auto dialed = comm::DialTcp("127.0.0.1", config.raw_port, deadline, "rank 0");
    Check(dialed.status(), "raw dial");
    fd = *dialed;
  }
  // Blocking mode for the classic loop.
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// One bandwidth sample: rank 0 send()s `total` bytes in `size` pieces, rank 1
// recv()s them; rank 1 acknowledges the end. MB/s on rank 0. `window`
// (> 0): both sides cycle through only the first `window` bytes of their
// buffers (what iperf3 does with its one `-l` block), so the data stays in
// the caches; 0: each piece uses `size` bytes of distinct memory.
double RawSample(int rank, int fd, std::vector<char>* buffer, size_t size, size_t window = 0) {
  const size_t total = TotalFor(size);
  const size_t span = window > 0 ? std::min(window, size) : size;
  char ack = 0;
  auto start = Clock::now();
  if (rank == 0) {
    for (size_t sent = 0; sent < total; sent += size) {
      for (size_t at = 0; at < size;) {
        const size_t offset = at % span;
        ssize_t n = ::send(fd, buffer->data() + offset, std::min(size - at, span - offset),
                           MSG_NOSIGNAL);
        if (n <= 0) std::exit(2);
        at += n;
      }
    }
    if (::recv(fd, &ack, 1, MSG_WAITALL) != 1) std::exit(2);
    return total / SecondsSince(start) / 1e6;
  }
  for (size_t received = 0; received < total; received += size) {
    for (size_t at = 0; at < size;) {
      const size_t offset = at % span;
      ssize_t n = ::recv(fd, buffer->data() + offset, std::min(size - at, span - offset), 0);
      if (n <= 0) std::exit(2);
      at += n;
    }
  }
  if (::send(fd, &ack, 1, MSG_NOSIGNAL) != 1) std::exit(2);
  return 0;
}

// Exactly 8 bytes from `fd`: a blocking recv, or (spin) recv without
// waiting, retried until they are there.
void Recv8(int fd, char* message, bool spin) {
  if (!spin) {
    if (::recv(fd, message, 8, MSG_WAITALL) != 8) std::exit(2);
    return;
  }
  for (size_t got = 0; got < 8;) {
    const ssize_t n = ::recv(fd, message + got, 8 - got, MSG_DONTWAIT);
    if (n > 0) {
      got += n;
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      std::exit(2);
    }
  }
}

// One block of `iterations` ping-pongs on the raw socket (both ranks);
// rank 0 returns the median round trip in microseconds. `spin`: both sides
// poll the socket instead of sleeping in recv (what a spinning MPI does).
double RawLatency(int rank, int fd, int iterations, bool spin) {
  std::vector<double> rtts;
  char message[8] = {0};
  for (int i = 0; i < iterations; ++i) {
    auto start = Clock::now();
    if (rank == 0) {
      ::send(fd, message, 8, MSG_NOSIGNAL);
      Recv8(fd, message, spin);
      rtts.push_back(SecondsSince(start) * 1e6);
    } else {
      Recv8(fd, message, spin);
      ::send(fd, message, 8, MSG_NOSIGNAL);
    }
  }
  return Median(rtts);
}

// ---------------------------------------------------------------- CommNet

struct Window {
  std::mutex mutex;
  std::condition_variable changed;
  int outstanding = 0;
  Status error;

  comm::Completion Take() {
    std::lock_guard<std::mutex> lock(mutex);
    ++outstanding;
    return [this](const Status& status) {
      std::lock_guard<std::mutex> lock(mutex);
      --outstanding;
      if (!status.ok()) error = status;
      changed.notify_all();  // under the lock: the waiter may destroy us
    };
  }
  void WaitBelow(int limit) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return outstanding < limit || !error.ok(); });
    Check(error, "CommNet transfer");
  }
};

struct Pong {
  std::mutex mutex;
  std::condition_variable arrived;
  std::atomic<uint64_t> count{0};
  comm::Connection* connection = nullptr;
  bool echo = false;
};

struct Results {
  std::vector<double> raw_bandwidth;
  std::vector<double> write_bandwidth;
  std::vector<double> read_bandwidth;
  std::vector<double> iperf3_bandwidth;  // negative: no good sample
  // Above kIperf3MaxBlock: the raw loop cycling through one iperf3-sized
  // block (cache-resident, as iperf3's); negative: not measured.
  std::vector<double> raw_reused_bandwidth;
  // Round trips: median of the per-block medians (blocks interleaved:
  // raw, raw spinning, CommNet, raw, ...), and every block's median.
  double raw_rtt_us = 0;
  double raw_spin_rtt_us = 0;
  double commnet_rtt_us = 0;
  std::vector<double> raw_rtt_blocks, raw_spin_rtt_blocks, commnet_rtt_blocks;
  double raw_rtt_cpu_us = 0;      // rank 0's CPU time per round trip
  double raw_spin_rtt_cpu_us = 0;
  double commnet_rtt_cpu_us = 0;
};

double TimeTransfers(comm::Connection* link, const comm::MemoryRegion& local,
                     const comm::RemoteKey& remote, size_t size, bool is_read) {
  const size_t total = TotalFor(size);
  const int window = static_cast<int>(std::clamp<size_t>((16u << 20) / size, 2, 64));
  Window inflight;
  auto start = Clock::now();
  for (size_t moved = 0; moved < total; moved += size) {
    inflight.WaitBelow(window);
    Status posted = is_read ? link->PostRead(local, 0, remote, 0, size, inflight.Take())
                            : link->PostWrite(local, 0, remote, 0, size, inflight.Take());
    Check(posted, "post");
  }
  inflight.WaitBelow(1);
  return total / SecondsSince(start) / 1e6;
}

// Raw and CommNet samples alternate, so both see the same machine load.
Results Measure(int rank, const Config& config) {
  Results result;
  const int raw_fd = RawConnect(rank, config);
  std::vector<char> raw_buffer(config.max_bytes);
  const std::string token = "p2p-bench";
  std::unique_ptr<comm::control::RendezvousServer> server;
  if (rank == 0) {
    comm::control::RendezvousOptions options;
    options.port = config.control_port;
    options.world_size = 2;
    options.job_token = token;
    auto started = comm::control::RendezvousServer::Start(options);
    Check(started.status(), "rendezvous");
    server = std::move(*started);
  }
  comm::control::ControlClientOptions client_options;
  client_options.master = "127.0.0.1:" + std::to_string(config.control_port);
  client_options.rank = rank;
  client_options.world_size = 2;
  client_options.job_token = token;
  auto control = comm::control::ControlClient::Connect(client_options);
  Check(control.status(), "control connect");

  Pong pong;
  comm::TransportOptions options;
  options.rank = rank;
  options.world_size = 2;
  options.on_message = [&pong](int, const void* data, size_t size) {
    if (pong.echo) {
      pong.connection->SendMessage(data, size).IgnoreError();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(pong.mutex);
      ++pong.count;
    }
    pong.arrived.notify_all();  // outside the lock: the waiter need not block on it
  };
  auto transport = CreateBenchTransport(config.provider, options, token, config.shm);
  Check(transport.status(), "transport");
  Check(comm::control::ConnectTransport(transport->get(), control->get(), "bench",
                                        milliseconds(30000)),
        "connect");
  comm::Connection* link = *(*transport)->GetConnection(1 - rank);
  pong.connection = link;
  pong.echo = rank == 1;
  std::vector<uint8_t> buffer(config.max_bytes, static_cast<uint8_t>(rank));
  auto region = (*transport)->RegisterMemory(buffer.data(), buffer.size(), comm::kAccessAll);
  Check(region.status(), "register");
  Check(comm::control::PublishRemoteKey(control->get(), "buffer", (*region)->remote_key()),
        "publish");
  auto peer_key = comm::control::FetchRemoteKey(control->get(), "buffer", 1 - rank,
                                                milliseconds(30000));
  Check(peer_key.status(), "fetch key");
  for (size_t size : Sizes(config)) {
    std::vector<double> raws, reuseds, writes, reads, iperfs;
    const bool reuse = size > kIperf3MaxBlock;
    for (int repeat = 0; repeat < config.repeats; ++repeat) {
      raws.push_back(RawSample(rank, raw_fd, &raw_buffer, size));
      if (reuse) reuseds.push_back(RawSample(rank, raw_fd, &raw_buffer, size, kIperf3MaxBlock));
      if (rank != 0) continue;  // rank 1's transport serves CommNet alone
      writes.push_back(TimeTransfers(link, **region, *peer_key, size, false));
      reads.push_back(TimeTransfers(link, **region, *peer_key, size, true));
      if (config.iperf3) {
        const double sample =
            Iperf3Sample(FreePort(), size, TotalFor(size), RankCpus(1, 2), RankCpus(0, 2));
        if (sample > 0) iperfs.push_back(sample);
      }
    }
    result.raw_bandwidth.push_back(Median(raws));
    result.write_bandwidth.push_back(Median(writes));
    result.read_bandwidth.push_back(Median(reads));
    result.iperf3_bandwidth.push_back(iperfs.empty() ? -1 : Median(iperfs));
    result.raw_reused_bandwidth.push_back(reuseds.empty() ? -1 : Median(reuseds));
  }
  // Latency in interleaved blocks, so load drift hits all three alike: the
  // raw blocking loop, the raw spinning loop (both ranks), then CommNet
  // (rank 0 pings, rank 1's handler echoes while its main thread already
  // sleeps in the next raw block's recv).
  const int block = LatencyBlock(config);
  double raw_cpu = 0, spin_cpu = 0, commnet_cpu = 0;
  uint64_t pings = 0;
  for (int repeat = 0; repeat < config.repeats; ++repeat) {
    double cpu_start = ProcessCpuSeconds();
    result.raw_rtt_blocks.push_back(RawLatency(rank, raw_fd, block, false));
    raw_cpu += ProcessCpuSeconds() - cpu_start;
    cpu_start = ProcessCpuSeconds();
    result.raw_spin_rtt_blocks.push_back(RawLatency(rank, raw_fd, block, true));
    spin_cpu += ProcessCpuSeconds() - cpu_start;
    if (rank != 0) continue;
    cpu_start = ProcessCpuSeconds();
    std::vector<double> rtts;
    char message[8] = {0};
    for (int i = 0; i < block; ++i) {
      auto start = Clock::now();
      Check(link->SendMessage(message, 8), "send");
      // The waiting thread polls for up to 50 us before it sleeps (what an
      // application thread waiting on a reply would do).
      const uint64_t want = ++pings;
      const auto spin_until = Clock::now() + std::chrono::microseconds(50);
      while (pong.count.load(std::memory_order_acquire) != want && Clock::now() < spin_until) {
        if (!(*transport)->Poll()) std::this_thread::yield();
      }
      // About to sleep: the progress thread takes over (transport.h).
      if (pong.count.load(std::memory_order_acquire) != want) (*transport)->EndPolling();
      std::unique_lock<std::mutex> lock(pong.mutex);
      pong.arrived.wait(lock, [&] { return pong.count.load() == want; });
      rtts.push_back(SecondsSince(start) * 1e6);
    }
    commnet_cpu += ProcessCpuSeconds() - cpu_start;
    result.commnet_rtt_blocks.push_back(Median(rtts));
  }
  ::close(raw_fd);
  const double round_trips = static_cast<double>(block) * config.repeats;
  result.raw_rtt_us = Median(result.raw_rtt_blocks);
  result.raw_spin_rtt_us = Median(result.raw_spin_rtt_blocks);
  result.commnet_rtt_us = Median(result.commnet_rtt_blocks);
  result.raw_rtt_cpu_us = raw_cpu * 1e6 / round_trips;
  result.raw_spin_rtt_cpu_us = spin_cpu * 1e6 / round_trips;
  result.commnet_rtt_cpu_us = commnet_cpu * 1e6 / round_trips;
  Check((*control)->Barrier("done", milliseconds(600000)), "final barrier");
  region->reset();
  return result;
}

int RunRank(int rank, const Config& config) {
  Results results = Measure(rank, config);
  if (rank != 0) return 0;
  std::printf("CommNet/%s point-to-point, 2 processes on loopback (medians of %d)\n",
              config.provider.c_str(), config.repeats);
  std::printf("binding: %s (iperf3's client and server get rank 0's and rank 1's)\n",
              DescribeBinding(2).c_str());
  std::printf("%-8s %12s %12s %12s %12s %12s %10s %13s\n", "size", "raw MB/s", "raw 1M-reuse",
              "iperf3 MB/s", "WRITE MB/s", "READ MB/s", "WRITE/raw", "WRITE/iperf3");
  const auto sizes = Sizes(config);
  auto figure = [](double value) {
    return value > 0 ? std::to_string(static_cast<long>(value + 0.5)) : std::string("-");
  };
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double iperf = results.iperf3_bandwidth[i];
    const std::string ratio_text =
        iperf > 0 ? std::to_string(static_cast<long>(100.0 * results.write_bandwidth[i] / iperf +
                                                     0.5)) + "%"
                  : "-";
    std::printf("%-8s %12.0f %12s %12s %12.0f %12.0f %9.0f%% %13s\n", SizeName(sizes[i]).c_str(),
                results.raw_bandwidth[i], figure(results.raw_reused_bandwidth[i]).c_str(),
                figure(iperf).c_str(), results.write_bandwidth[i], results.read_bandwidth[i],
                100.0 * results.write_bandwidth[i] / results.raw_bandwidth[i], ratio_text.c_str());
  }
  std::printf("raw 1M-reuse: the raw loop cycling through one 1 MiB block on both sides, as "
              "iperf3 does\n(cache-resident data); the other columns move distinct memory.\n");
  if (!config.iperf3) std::printf("iperf3: not run (--iperf3=0 or not installed)\n");
  auto blocks = [](const std::vector<double>& values) {
    std::string text;
    for (double value : values) {
      char item[32];
      std::snprintf(item, sizeof(item), "%s%.1f", text.empty() ? "" : " ", value);
      text += item;
    }
    return text;
  };
  std::printf("8-byte round trip (us, median of %d interleaved blocks of %d; the blocks' medians "
              "in brackets):\n",
              config.repeats, LatencyBlock(config));
  std::printf("  raw socket, blocking recv  %6.1f  [%s]\n", results.raw_rtt_us,
              blocks(results.raw_rtt_blocks).c_str());
  std::printf("  raw socket, spinning recv  %6.1f  [%s]\n", results.raw_spin_rtt_us,
              blocks(results.raw_spin_rtt_blocks).c_str());
  std::printf("  CommNet message            %6.1f  [%s]   %.2fx blocking, %.2fx spinning\n",
              results.commnet_rtt_us, blocks(results.commnet_rtt_blocks).c_str(),
              results.commnet_rtt_us / results.raw_rtt_us,
              results.commnet_rtt_us / results.raw_spin_rtt_us);
  std::printf("CPU per round trip (rank 0, user + sys): raw blocking %.1f us, raw spinning %.1f "
              "us, CommNet %.1f us\n",
              results.raw_rtt_cpu_us, results.raw_spin_rtt_cpu_us, results.commnet_rtt_cpu_us);
  std::printf("load average %s (at the end)\n", LoadAverage().c_str());
  return 0;
}

std::vector<cli::FlagSpec> FlagSpecs() {
  std::vector<cli::FlagSpec> specs =
      CommBenchFlagSpecs("CommNet providers, comma-separated (default tcp,shm)");
  specs.push_back({"latency_iterations", "round trips per latency sample", false, "20000"});
  specs.push_back({"iperf3", "iperf3 single-stream samples beside (when installed)", true, "true"});
  return specs;
}

// The command line, read: `config` as every provider's run shares it.
struct Options {
  Config config;
  std::vector<std::string> providers;
};

StatusOr<Options> ReadOptions(const cli::FlagSet& flags) {
  Options options;
  ASSIGN_OR_RETURN(CommBenchOptions common, ReadCommBenchFlags(flags));
  Config& config = options.config;
  config.repeats = common.repeats;
  config.min_bytes = common.min_bytes;
  config.max_bytes = common.max_bytes;
  config.shm = common.shm;
  config.iperf3 = flags.GetBool("iperf3") && Iperf3Available();
  ASSIGN_OR_RETURN(config.latency_iterations,
                   flags.GetInt("latency_iterations", 1, 1000 * 1000 * 1000));
  options.providers =
      common.providers.empty() ? std::vector<std::string>{"tcp", "shm"} : common.providers;
  return options;
}

int Run(const Options& options) {
  Config config = options.config;
  int failed = 0;
  for (const std::string& provider : options.providers) {
    config.provider = provider;
    config.control_port = FreePort();
    config.raw_port = FreePort();
    failed |= RunRanks(2, [&](int rank) { return RunRank(rank, config); });
    std::fflush(stdout);
  }
  return failed;
}

}  // namespace
}  // namespace bench
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite::bench;
  return BenchMain(argc, argv, "comm_p2p_bench", kUsage, FlagSpecs(), ReadOptions, Run);
}
