// All-reduce bus bandwidth of CommNet's ring over each provider (tcp and
// shm by default) next to Gloo's ring all-reduce (Debian libgloo-dev, TCP
// transport) in the same run, for 2, 3 and 4 processes on this host, float32
// sums from 4 KiB to 64 MiB. OpenMPI (over vader, the peer of shm, and over
// TCP) joins with --mpi_bench=PATH (the program mpi_allreduce_bench.sh
// --compile_to=PATH builds), one mpirun per sample timing both MPI_Allreduce
// variants (in place and out of place; --mpi_variant for one), each row
// holding ours against OpenMPI's better one. The samples of one size
// alternate between all algorithms (ours, Gloo's, OpenMPI's, then again).
//
//   bazel run -c opt //tools/bench:allreduce_bench -- [--nproc=0 (2,3,4)]
//       [--repeats=5] [--min_bytes=4096] [--max_bytes=67108864]
//       [--comm=tcp,shm] [--gloo=1] [--shm_spin_us=N]
//       [--shm_inline_bytes=N] [--shm_caller_poll=0|1] [--ring_poll=0|1]
//       [--calibration=C: the plan column as oflite compile --calibration C
//       chooses]
//       [--help: every flag]
//
// One rank per host (e.g. per network namespace, tests/netns/netns.sh run):
//   allreduce_bench --addrs=A0,A1,... --rank=R [--port=29600]
//       [--gloo_dir=DIR] [--comm=tcp] [--min_bytes=..] [--max_bytes=..]
// runs rank R only, listening on address AR (rank 0 also serves the
// rendezvous at A0:port); Gloo's file store is DIR (default
// /tmp/oflite-gloo-PORT, a file system every rank sees). Rank 0 prints, and
// beside each CommNet ring figure the link time the bytes a rank sends need.
//
// busbw = 2 (N - 1) / N * bytes / time (the nccl-tests convention): the bytes
// each rank moves per unit time. Each sample times `iterations` back-to-back
// all-reduces on rank 0 (clamp(8 MiB / size, 1, 32), or --iterations for
// both sides), after a barrier; figures are medians over --repeats
// samples. Every library reduces in place: CommNet's ring a buffer from
// Transport::AllocateRegistered (what the runtime's collectives reduce; shm
// backs it with a memfd the peers map, as MPI_Alloc_mem may; --ring_user_buffer
// registers the caller's buffer instead), the others one ordinary buffer
// (OpenMPI also out of place, in its program's own buffers); each one's
// first result is checked. (Timed repeats grow the values: floats may
// reach inf, which costs the same.) Beside busbw, each CommNet provider gets a table of
// rank 0's CPU time per all-reduce (user + system, all threads of the
// process, median of the samples): a figure that load from other jobs
// disturbs far less than wall time. --gloo=0 leaves Gloo out (for CPU
// profiles and callgrind of CommNet alone).
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "oneflow_lite/comm/collective/exchange.h"
#include "oneflow_lite/comm/collective/ring.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/common/ring_segments.h"
#include "oneflow_lite/compiler/collective_choice.h"
#include "oneflow_lite/cost/calibration.h"
#include "oneflow_lite/comm/control/connect.h"
#include "oneflow_lite/comm/control/rendezvous_server.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/comm_bench_util.h"
#include "tools/bench/mpi_peer.h"

namespace oflite {
namespace bench {
namespace {

using comm::Clock;
using std::chrono::milliseconds;

// After "usage: ... <program>" in --help.
constexpr char kUsage[] =
    "[flags]\n\n"
    "All-reduce bus bandwidth (float32 sum) of CommNet's ring over each provider next to\n"
    "Gloo's ring and ring-chunked, 2/3/4 processes on this host; with --addrs, one rank\n"
    "per host (each its own process, e.g. in tests/netns/netns.sh run).\n"
    "Columns per provider: ring, exch (the exchange; recursive doubling at 2\n"
    "processes), rd (recursive doubling, 4 processes), sg (scatter-gather, 3 and 4\n"
    "processes) and plan (what the compiler records for the size; with --calibration,\n"
    "what it records from that calibration's curves). The\n"
    "<provider>/peer column: the plan's figure against the best peer (tcp: Gloo's two\n"
    "and OpenMPI over TCP; shm: OpenMPI over vader). OpenMPI's column per transport:\n"
    "the better of MPI_Allreduce in place (ip) and out of place (oop), then which won;\n"
    "a table below gives both.";

struct Config {
  int world = 0;
  int repeats = 0;
  // --iterations: back-to-back ops per sample, for ours and OpenMPI's; 0:
  // the rule in Iterations().
  int iterations = 0;
  size_t min_bytes = 0;
  size_t max_bytes = 0;
  int control_port = 0;
  std::string gloo_dir;
  // Multi-host mode (--addrs): every rank's address; empty: forked ranks on
  // loopback.
  std::vector<std::string> addrs;
  std::vector<std::string> providers;
  bool gloo = true;
  comm::shm::ShmOptions shm;
  comm::CollectiveOptions ring;  // --ring_chunk_bytes, --ring_slots
  // --mpi_bench: OpenMPI's program (mpi_allreduce_bench.sh --compile_to),
  // run sample by sample over each of `mpi_btls`; empty: no OpenMPI.
  std::string mpi_bench;
  std::vector<std::string> mpi_btls;
  // --calibration: the plan column's algorithm comes from these tables'
  // curves (PlannedAlgorithm); null: the compiler's size rule.
  std::shared_ptr<cost::CostTables> tables;
  // --mpi_variant: which MPI_Allreduce variants each OpenMPI sample times
  // (kMpiInPlace, kMpiOutOfPlace).
  std::vector<int> mpi_variants;
  // --algorithms: which of CommNet's all-reduces run (ring, exchange,
  // doubling, sg); the others print "-" and the plan column falls back to
  // what ran (the ring always does).
  bool time_ring = true, exchange = true, doubling = true, scatter_gather = true;
  // --ring_user_buffer: the ring reduces the caller's buffer, registered
  // (RegisterMemory), instead of the transport's memory.
  bool ring_user_buffer = false;
};

void Check(const Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

// The exchange all-reduce is timed up to this size (the compiler uses it
// far below; the column shows where the crossover lies).
constexpr size_t kExchangeBenchMaxBytes = 4u << 20;

// Worlds where recursive doubling differs from the exchange: powers of 2
// above 2.
bool Doubles(int world) { return world > 2 && IsPowerOfTwo(world); }

// Worlds where the scatter-gather exchange differs from the ring's
// schedule: above 2.
bool ScatterGathers(int world) { return world > 2; }

int Iterations(size_t bytes, int fixed) {
  if (fixed > 0) return fixed;
  return static_cast<int>(std::clamp<size_t>((8u << 20) / bytes, 1, 32));
}

double BusBandwidth(int world, size_t bytes, double seconds) {
  return 2.0 * (world - 1) / world * bytes / seconds / 1e6;
}

struct Timing {
  double seconds = 0;      // wall time per op (median)
  double cpu_seconds = 0;  // this process's CPU time per op (median)
};

void Fill(float* data, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + 1);
}

// After one all-reduce of a buffer filled with rank + 1, every element is
// N(N+1)/2: checked on a few elements.
void Verify(const float* data, size_t count, int world, const char* who) {
  const double expected = world * (world + 1) / 2.0;
  for (size_t i : {size_t{0}, count / 2, count - 1}) {
    if (std::fabs(data[i] - expected) > 1e-3 * expected) {
      std::fprintf(stderr, "%s: wrong result %f (expected %f)\n", who, data[i], expected);
      std::exit(3);
    }
  }
}

struct Row {
  size_t bytes;
  // Per provider; an exchange Timing of 0 s: not timed (above the limit);
  // a doubling one: not timed (world not a power of 2 above 2, or above
  // the limit); a scatter-gather one: not timed (2 processes, or above the
  // limit).
  std::vector<Timing> ring, exchange, doubling, scatter_gather;
  Timing gloo_ring, gloo_chunked;
  // Per Config::mpi_btls, the median per variant; negative: not run, or no
  // good sample.
  std::vector<MpiSample> mpi_busbw;
};

// OpenMPI's better variant over btl `b` of `row`: its index, or -1 when
// neither has a figure.
int MpiWinner(const Row& row, size_t b) {
  const MpiSample& busbw = row.mpi_busbw[b];
  int winner = -1;
  for (int variant = 0; variant < kMpiVariants; ++variant) {
    if (busbw[variant] > 0 && (winner < 0 || busbw[variant] > busbw[winner])) winner = variant;
  }
  return winner;
}

// The timing of `algorithm` in `row` for `provider`, or null for one the
// bench does not run.
const Timing* TimingOf(const Row& row, size_t provider, CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case COLLECTIVE_RING_ALL_REDUCE: return &row.ring[provider];
    case COLLECTIVE_EXCHANGE_ALL_REDUCE: return &row.exchange[provider];
    case COLLECTIVE_DOUBLING_ALL_REDUCE: return &row.doubling[provider];
    case COLLECTIVE_SCATTER_GATHER_ALL_REDUCE: return &row.scatter_gather[provider];
    default: return nullptr;
  }
}

// The algorithm the compiler records for a P -> B of this size: without
// --calibration its size rule (common/ring_segments.h, UseDoublingAllReduce,
// UseScatterGatherAllReduce, UseExchangeAllReduce); with it, the candidate
// the calibration's curves of the provider predict fastest
// (compiler::ChooseCollective with `oflite compile --calibration`; one
// host, so no link term), among those this row timed. The "plan" column,
// and what the <provider>/peer column holds against the best peer.
CollectiveAlgorithm PlannedAlgorithm(const Config& config, const Row& row, size_t provider,
                                     int world) {
  const TransportCost* transport =
      config.tables ? config.tables->transport(config.providers[provider]) : nullptr;
  if (transport != nullptr) {
    CollectiveAlgorithm best = COLLECTIVE_UNSET;
    double best_us = 0;
    for (CollectiveAlgorithm a :
         compiler::PartialSumCandidates(COLLECTIVE_RING_ALL_REDUCE, world)) {
      const Timing* timing = TimingOf(row, provider, a);
      if (timing == nullptr || timing->seconds <= 0) continue;
      const double us = cost::PredictCollectiveUs(*config.tables, transport, LinkSpec(), a, world,
                                                  static_cast<int64_t>(row.bytes));
      if (us >= 0 && (best == COLLECTIVE_UNSET || us < best_us)) {
        best = a;
        best_us = us;
      }
    }
    if (best != COLLECTIVE_UNSET) return best;
  }
  if (UseDoublingAllReduce(row.bytes, world) && row.doubling[provider].seconds > 0) {
    return COLLECTIVE_DOUBLING_ALL_REDUCE;
  }
  if (UseScatterGatherAllReduce(row.bytes, world) && row.scatter_gather[provider].seconds > 0) {
    return COLLECTIVE_SCATTER_GATHER_ALL_REDUCE;
  }
  return UseExchangeAllReduce(row.bytes, world) && row.exchange[provider].seconds > 0
             ? COLLECTIVE_EXCHANGE_ALL_REDUCE
             : COLLECTIVE_RING_ALL_REDUCE;
}

const Timing& Planned(const Config& config, const Row& row, size_t provider, int world) {
  return *TimingOf(row, provider, PlannedAlgorithm(config, row, provider, world));
}

// The plan column's algorithm, as the table's column heads name it.
const char* ShortName(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case COLLECTIVE_EXCHANGE_ALL_REDUCE: return "exch";
    case COLLECTIVE_DOUBLING_ALL_REDUCE: return "rd";
    case COLLECTIVE_SCATTER_GATHER_ALL_REDUCE: return "sg";
    default: return "ring";
  }
}

// The best peer figure a provider's plan is held against: for tcp the
// better of Gloo's two and OpenMPI over TCP, for shm OpenMPI over vader;
// negative when none ran.
double PeerBest(const Config& config, const Row& row, const std::string& provider, int world) {
  double best = -1;
  if (provider != "shm" && config.gloo) {
    best = std::max(BusBandwidth(world, row.bytes, row.gloo_ring.seconds),
                    BusBandwidth(world, row.bytes, row.gloo_chunked.seconds));
  }
  const std::string btl = provider == "shm" ? "vader" : "tcp";
  for (size_t b = 0; b < config.mpi_btls.size(); ++b) {
    const int winner = MpiWinner(row, b);
    if (config.mpi_btls[b] == btl && winner >= 0) {
      best = std::max(best, row.mpi_busbw[b][winner]);
    }
  }
  return best;
}

void PrintRows(int world, const Config& config, const std::vector<Row>& rows) {
  std::printf("\nAll-reduce busbw, %d processes, float32 sum (MB/s, medians of %d, samples "
              "interleaved)\n",
              world, config.repeats);
  // Forked ranks only: with --addrs each process is its own host's rank.
  if (config.addrs.empty()) {
    std::printf("binding: %s", DescribeBinding(world).c_str());
    if (!config.mpi_btls.empty()) {
      std::printf("; OpenMPI: mpirun %s", MpiBindOptions(world).c_str());
    }
    std::printf("\n");
  }
  std::printf("load average %s (at the end of the sizes)\n", LoadAverage().c_str());
  std::printf("%-8s", "size");
  for (const std::string& provider : config.providers) {
    std::printf(" %11s %11s", (provider + " ring").c_str(), (provider + " exch").c_str());
    if (Doubles(world)) std::printf(" %11s", (provider + " rd").c_str());
    if (ScatterGathers(world)) std::printf(" %11s", (provider + " sg").c_str());
    std::printf(" %11s", (provider + " plan").c_str());
  }
  if (config.gloo) std::printf(" %10s %13s", "Gloo ring", "Gloo chunked");
  for (const std::string& btl : config.mpi_btls) {
    std::printf(" %10s %-3s", ("OMPI " + btl).c_str(), "won");
  }
  for (const std::string& provider : config.providers) {
    std::printf(" %10s", (provider + "/peer").c_str());
  }
  std::printf("\n");
  for (const Row& row : rows) {
    std::printf("%-8s", SizeName(row.bytes).c_str());
    for (size_t i = 0; i < row.ring.size(); ++i) {
      const double plan = BusBandwidth(world, row.bytes, Planned(config, row, i, world).seconds);
      // A Timing of 0 s was not timed: "-".
      auto print = [&](const Timing& timing) {
        if (timing.seconds > 0) {
          std::printf(" %11.0f", BusBandwidth(world, row.bytes, timing.seconds));
        } else {
          std::printf(" %11s", "-");
        }
      };
      print(row.ring[i]);
      print(row.exchange[i]);
      if (Doubles(world)) print(row.doubling[i]);
      if (ScatterGathers(world)) print(row.scatter_gather[i]);
      std::printf(" %11.0f", plan);
    }
    if (config.gloo) {
      std::printf(" %10.0f %13.0f", BusBandwidth(world, row.bytes, row.gloo_ring.seconds),
                  BusBandwidth(world, row.bytes, row.gloo_chunked.seconds));
    }
    for (size_t b = 0; b < row.mpi_busbw.size(); ++b) {
      const int winner = MpiWinner(row, b);
      if (winner >= 0) {
        std::printf(" %10.0f %-3s", row.mpi_busbw[b][winner], MpiVariantShort(winner));
      } else {
        std::printf(" %10s %-3s", "-", "-");
      }
    }
    for (size_t i = 0; i < row.ring.size(); ++i) {
      const double plan = BusBandwidth(world, row.bytes, Planned(config, row, i, world).seconds);
      const double peer = PeerBest(config, row, config.providers[i], world);
      if (peer > 0) {
        std::printf(" %9.0f%%", 100.0 * plan / peer);
      } else {
        std::printf(" %10s", "-");
      }
    }
    std::printf("\n");
  }
  // A table of one cell per size and provider, under `title`.
  auto per_provider = [&](const std::string& title,
                          const std::function<std::string(const Row&, size_t)>& cell) {
    std::printf("%s\n%-8s", title.c_str(), "size");
    for (const std::string& provider : config.providers) {
      std::printf(" %14s", ("CommNet " + provider).c_str());
    }
    std::printf("\n");
    for (const Row& row : rows) {
      std::printf("%-8s", SizeName(row.bytes).c_str());
      for (size_t i = 0; i < row.ring.size(); ++i) std::printf(" %14s", cell(row, i).c_str());
      std::printf("\n");
    }
  };
  per_provider("Rank 0's CPU time per all-reduce, plan's algorithm (user + sys, all threads; us, "
               "medians)",
               [&](const Row& row, size_t i) {
                 char cpu[32];
                 std::snprintf(cpu, sizeof(cpu), "%.1f",
                               Planned(config, row, i, world).cpu_seconds * 1e6);
                 return std::string(cpu);
               });
  per_provider(std::string("The plan's algorithm (") +
                   (config.tables ? "the calibration's fastest prediction" : "the size rule") + ")",
               [&](const Row& row, size_t i) {
                 return std::string(ShortName(PlannedAlgorithm(config, row, i, world)));
               });
  if (!config.mpi_btls.empty()) {
    std::printf("OpenMPI MPI_Allreduce per variant: in place (ip, MPI_IN_PLACE) and out of "
                "place (oop, separate send and receive buffers) (MB/s, medians)\n");
    std::printf("%-8s", "size");
    for (const std::string& btl : config.mpi_btls) {
      for (int variant : config.mpi_variants) {
        std::printf(" %10s", (btl + " " + MpiVariantShort(variant)).c_str());
      }
    }
    std::printf("\n");
    for (const Row& row : rows) {
      std::printf("%-8s", SizeName(row.bytes).c_str());
      for (const MpiSample& busbw : row.mpi_busbw) {
        for (int variant : config.mpi_variants) {
          if (busbw[variant] > 0) {
            std::printf(" %10.0f", busbw[variant]);
          } else {
            std::printf(" %10s", "-");
          }
        }
      }
      std::printf("\n");
    }
  }
  std::fflush(stdout);
}

// One CommNet provider's transport and communicators.
struct Net {
  comm::MessageRouter router;
  comm::CommStats stats;
  std::unique_ptr<comm::Transport> transport;
  std::unique_ptr<comm::RegisteredPool> pool;
  std::unique_ptr<comm::RingCommunicator> ring;
  std::unique_ptr<comm::ExchangeCommunicator> exchange;
  // Recursive doubling (worlds of 4, 8, ...; at 2 "exchange" runs it).
  std::unique_ptr<comm::ExchangeCommunicator> doubling;
  // Reduce-scatter then all-gather, each one step of direct messages.
  std::unique_ptr<comm::ExchangeCommunicator> scatter_gather;
  std::unique_ptr<comm::MemoryRegion> region;
};

// One algorithm timed at one size: one all-reduce, and its samples.
struct Contender {
  std::string name;
  std::function<void()> run;
  float* data;  // the buffer it reduces
  std::vector<double> walls, cpus;  // per op
  Timing Median() const { return {bench::Median(walls), bench::Median(cpus)}; }
};

// Every algorithm at `bytes`, sample by sample in turn (CommNet's ring and
// exchange per provider, Gloo's ring and ring-chunked, OpenMPI's transports
// with --mpi_bench), so load that drifts during the size hits all of them.
// Each sample starts at a control-plane barrier and one untimed op, as
// OpenMPI's start with a warm-up op and MPI_Barrier; each algorithm's first
// result is checked, a second run warms it up.
Row MeasureSize(int rank, const Config& config, size_t bytes, float* buffer,
                const std::vector<std::unique_ptr<Net>>& nets,
                const std::shared_ptr<gloo::rendezvous::Context>& context,
                comm::control::ControlClient* control) {
  const int world = config.world;
  const size_t count = bytes / sizeof(float);
  const int iterations = Iterations(bytes, config.iterations);
  std::vector<Contender> contenders;
  for (const auto& owned : nets) {
    Net* net = owned.get();
    if (config.time_ring) {
      contenders.push_back({"CommNet ring", [net, count] {
        Check(net->ring->AllReduce(*net->region, 0, count, DT_FLOAT,
                                   comm::DeadlineAfter(milliseconds(120000))),
              "CommNet ring all-reduce");
      }, reinterpret_cast<float*>(net->region->data())});
    }
    if (bytes <= kExchangeBenchMaxBytes && config.exchange) {
      contenders.push_back({"CommNet exchange", [net, buffer, count] {
        Check(net->exchange->AllReduce(buffer, count, DT_FLOAT,
                                       comm::DeadlineAfter(milliseconds(120000))),
              "CommNet exchange all-reduce");
      }, buffer});
    }
    if (bytes <= kExchangeBenchMaxBytes && Doubles(world) && config.doubling) {
      contenders.push_back({"CommNet doubling", [net, buffer, count] {
        Check(net->doubling->AllReduce(buffer, count, DT_FLOAT,
                                       comm::DeadlineAfter(milliseconds(120000))),
              "CommNet recursive doubling all-reduce");
      }, buffer});
    }
    if (bytes <= kExchangeBenchMaxBytes && ScatterGathers(world) && config.scatter_gather) {
      contenders.push_back({"CommNet scatter-gather", [net, buffer, count] {
        Check(net->scatter_gather->AllReduce(buffer, count, DT_FLOAT,
                                             comm::DeadlineAfter(milliseconds(120000))),
              "CommNet scatter-gather all-reduce");
      }, buffer});
    }
  }
  std::unique_ptr<gloo::AllreduceRing<float>> gloo_ring;
  std::unique_ptr<gloo::AllreduceRingChunked<float>> gloo_chunked;
  if (config.gloo) {
    gloo_ring = std::make_unique<gloo::AllreduceRing<float>>(
        context, std::vector<float*>{buffer}, static_cast<int>(count));
    gloo_chunked = std::make_unique<gloo::AllreduceRingChunked<float>>(
        context, std::vector<float*>{buffer}, static_cast<int>(count));
    contenders.push_back({"Gloo ring", [&gloo_ring] { gloo_ring->run(); }, buffer});
    contenders.push_back(
        {"Gloo ring_chunked", [&gloo_chunked] { gloo_chunked->run(); }, buffer});
  }
  for (Contender& contender : contenders) {
    Fill(contender.data, count, rank);
    contender.run();
    Verify(contender.data, count, world, contender.name.c_str());
    contender.run();
  }
  // Per btl, per variant: the busbw of each good sample.
  std::vector<std::array<std::vector<double>, kMpiVariants>> mpi(config.mpi_btls.size());
  for (int repeat = 0; repeat < config.repeats; ++repeat) {
    for (Contender& contender : contenders) {
      Check(control->Barrier("sample", milliseconds(120000)), "barrier");
      // One untimed op first, as OpenMPI's program does in each of its
      // samples (a warm-up, then MPI_Barrier over its own transport): the
      // progress threads, idle during the other algorithms' samples, are
      // awake again before the clock starts, as in a training step.
      contender.run();
      const auto start = Clock::now();
      const double cpu_start = ProcessCpuSeconds();
      for (int i = 0; i < iterations; ++i) contender.run();
      contender.cpus.push_back((ProcessCpuSeconds() - cpu_start) / iterations);
      contender.walls.push_back(SecondsSince(start) / iterations);
    }
    if (!config.mpi_bench.empty()) {
      // The other ranks wait at the barrier while rank 0 runs OpenMPI.
      // Its variants take turns sampling first, as ours follow each other.
      for (size_t b = 0; rank == 0 && b < config.mpi_btls.size(); ++b) {
        const MpiSample busbw = MpiAllReduceSample(config.mpi_bench, config.mpi_btls[b], world,
                                                   bytes, config.mpi_variants, repeat % 2 == 1,
                                                   config.iterations);
        for (int variant = 0; variant < kMpiVariants; ++variant) {
          if (busbw[variant] > 0) mpi[b][variant].push_back(busbw[variant]);
        }
      }
      Check(control->Barrier("mpi", milliseconds(600000)), "barrier");
    }
  }
  Row row{bytes, {}, {}, {}, {}, {}, {}, {}};
  size_t next = 0;
  for (size_t i = 0; i < nets.size(); ++i) {
    row.ring.push_back(config.time_ring ? contenders[next++].Median() : Timing());
    // In the order MeasureSize pushed them.
    row.exchange.push_back(bytes <= kExchangeBenchMaxBytes && config.exchange
                               ? contenders[next++].Median()
                               : Timing());
    row.doubling.push_back(bytes <= kExchangeBenchMaxBytes && Doubles(world) && config.doubling
                               ? contenders[next++].Median()
                               : Timing());
    row.scatter_gather.push_back(bytes <= kExchangeBenchMaxBytes && ScatterGathers(world) &&
                                         config.scatter_gather
                                     ? contenders[next++].Median()
                                     : Timing());
  }
  if (config.gloo) {
    row.gloo_ring = contenders[next++].Median();
    row.gloo_chunked = contenders[next++].Median();
  }
  for (const auto& variants : mpi) {
    MpiSample busbw;
    for (int variant = 0; variant < kMpiVariants; ++variant) {
      busbw[variant] = variants[variant].empty() ? -1 : bench::Median(variants[variant]);
    }
    row.mpi_busbw.push_back(busbw);
  }
  return row;
}

int RunRank(int rank, const Config& config) {
  const int world = config.world;
  const std::string token = "allreduce-bench";
  // CommNet: control plane, TCP transport, ring communicator.
  const std::string host = config.addrs.empty() ? "127.0.0.1" : config.addrs[rank];
  std::unique_ptr<comm::control::RendezvousServer> server;
  if (rank == 0) {
    comm::control::RendezvousOptions options;
    options.host = host;
    options.port = config.control_port;
    options.world_size = world;
    options.job_token = token;
    auto started = comm::control::RendezvousServer::Start(options);
    Check(started.status(), "rendezvous");
    server = std::move(*started);
  }
  comm::control::ControlClientOptions client_options;
  client_options.master = (config.addrs.empty() ? "127.0.0.1" : config.addrs[0]) + ":" +
                          std::to_string(config.control_port);
  client_options.rank = rank;
  client_options.world_size = world;
  client_options.job_token = token;
  auto control = comm::control::ControlClient::Connect(client_options);
  Check(control.status(), "control");
  // One ring per provider, each over its own transport, on one buffer.
  std::vector<float> buffer(config.max_bytes / sizeof(float));
  std::vector<std::unique_ptr<Net>> nets;
  for (const std::string& provider : config.providers) {
    auto net = std::make_unique<Net>();
    comm::TransportOptions options;
    options.rank = rank;
    options.world_size = world;
    options.on_message = net->router.AsHandler();
    // As in the runtime's sessions: the exchange's pieces fill these.
    options.message_slot_size = kRuntimeMessageSlotSize;
    auto transport = CreateBenchTransport(provider, options, token, config.shm, host);
    Check(transport.status(), "transport");
    net->transport = std::move(*transport);
    Check(comm::control::ConnectTransport(net->transport.get(), control->get(),
                                          "bench-" + provider, milliseconds(60000)),
          "connect");
    auto pool = comm::RegisteredPool::Create(net->transport.get(),
                                             comm::RegisteredPoolOptions(), &net->stats.pool);
    Check(pool.status(), "pool");
    net->pool = std::move(*pool);
    auto ring = comm::RingCommunicator::Create(net->transport.get(), &net->router,
                                               net->pool.get(), config.ring);
    Check(ring.status(), "ring");
    net->ring = std::move(*ring);
    comm::ExchangeOptions exchange_options;
    exchange_options.wait_spin = config.ring.wait_spin;  // one knob for both waits
    auto exchange = comm::ExchangeCommunicator::Create(net->transport.get(), &net->router,
                                                       exchange_options);
    Check(exchange.status(), "exchange");
    net->exchange = std::move(*exchange);
    exchange_options.channel = 0x300;
    if (Doubles(world)) {
      exchange_options.schedule = comm::ExchangeSchedule::kDoubling;
      auto doubling = comm::ExchangeCommunicator::Create(net->transport.get(), &net->router,
                                                         exchange_options);
      Check(doubling.status(), "doubling");
      net->doubling = std::move(*doubling);
    }
    exchange_options.channel = 0x400;
    exchange_options.schedule = comm::ExchangeSchedule::kScatterGather;
    auto scatter_gather = comm::ExchangeCommunicator::Create(net->transport.get(), &net->router,
                                                             exchange_options);
    Check(scatter_gather.status(), "scatter-gather");
    net->scatter_gather = std::move(*scatter_gather);
    // The ring's buffer: memory from the transport (AllocateRegistered),
    // as the runtime's collective buffers come from its registered pool;
    // --ring_user_buffer: the caller's own memory, registered.
    auto region = config.ring_user_buffer
                      ? net->transport->RegisterMemory(buffer.data(), config.max_bytes,
                                                       comm::kAccessAll)
                      : net->transport->AllocateRegistered(config.max_bytes, comm::kAccessAll);
    Check(region.status(), "register");
    net->region = std::move(*region);
    nets.push_back(std::move(net));
  }

  // Gloo: file-store rendezvous, TCP device, full mesh.
  std::shared_ptr<gloo::rendezvous::Context> context;
  if (config.gloo) {
    auto device = gloo::transport::tcp::CreateDevice(host.c_str());
    gloo::rendezvous::FileStore store(config.gloo_dir);
    context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    context->connectFullMesh(store, device);
  }

  std::vector<Row> rows;
  for (size_t bytes = config.min_bytes; bytes <= config.max_bytes; bytes *= 4) {
    rows.push_back(MeasureSize(rank, config, bytes, buffer.data(), nets, context, control->get()));
  }
  Check((*control)->Barrier("done", milliseconds(120000)), "final barrier");
  if (rank == 0) PrintRows(world, config, rows);
  nets.clear();  // rings and regions before their transports (member order)
  return 0;
}

std::vector<cli::FlagSpec> FlagSpecs() {
  const comm::CollectiveOptions ring;
  std::vector<cli::FlagSpec> specs =
      CommBenchFlagSpecs("CommNet providers, comma-separated (default tcp,shm; tcp with --addrs)");
  std::vector<cli::FlagSpec> own = {
      {"nproc", "only this many processes (0: 2, 3 and 4)", false, "0"},
      {"iterations",
       "back-to-back all-reduces per sample, ours and OpenMPI's (0: clamp(8 MiB / size, 1, "
       "32); more for profiling or to see how short samples read)",
       false, "0"},
      {"gloo", "time Gloo beside (--gloo=0: CPU profiles of CommNet alone)", true, "true"},
      {"ring_chunk_bytes", "the ring's chunk size", false, std::to_string(ring.chunk_bytes)},
      {"ring_slots", "the ring's slots per neighbour", false, std::to_string(ring.slots)},
      {"ring_spin_us", "how long a ring or exchange waiter polls before it sleeps", false,
       std::to_string(ring.wait_spin.count())},
      {"ring_poll", "a ring waiter drives the transport (Transport::Poll)", true,
       ring.wait_poll ? "true" : "false"},
      {"ring_user_buffer",
       "the ring reduces the caller's buffer, registered (RegisterMemory), instead of memory "
       "from Transport::AllocateRegistered (shm: a memfd the peers map)",
       true, "false"},
      {"mpi_bench",
       "OpenMPI's program (tools/bench/mpi_allreduce_bench.sh --compile_to=PATH), run by "
       "mpirun sample by sample between ours (default: none)"},
      {"mpi_btl", "its transports (vader, tcp: the shm and tcp peers)", false, "vader,tcp"},
      {"mpi_variant",
       "its MPI_Allreduce variants: both (each sample times in place and out of place; "
       "the better counts), in_place or out_of_place",
       false, "both"},
      {"calibration",
       "a calibration (oflite profile): the plan column takes the algorithm its curves "
       "predict fastest per provider, as oflite compile --calibration does (default: the "
       "compiler's size rule)"},
      {"algorithms",
       "CommNet's all-reduces to time (ring, exchange, doubling, sg; comma-separated; one "
       "alone for a profiler; a row without the ring prints 0 where it would stand)",
       false, "ring,exchange,doubling,sg"},
      {"addrs", "one rank per host: every rank's address, comma-separated (world = their count)"},
      {"rank",
       "with --addrs: this process's rank; listens on its address (rank 0 serves "
       "the rendezvous at the first, port --port)"},
      {"port", "with --addrs: the rendezvous port", false, "29600"},
      {"gloo_dir",
       "with --addrs: Gloo's file store, seen by every rank; rank 0 empties it "
       "(default /tmp/oflite-gloo-PORT)"}};
  specs.insert(specs.end(), own.begin(), own.end());
  return specs;
}

// The command line, read: `config` as every world shares it. Forked ranks
// (no --addrs) run each of `worlds` in turn; with --addrs this process runs
// `rank` of config.world.
struct Options {
  Config config;
  std::vector<int> worlds;
  int rank = -1;
};

StatusOr<Options> ReadOptions(const cli::FlagSet& flags) {
  Options options;
  Config& config = options.config;
  ASSIGN_OR_RETURN(CommBenchOptions common, ReadCommBenchFlags(flags));
  config.repeats = common.repeats;
  config.min_bytes = common.min_bytes;
  config.max_bytes = common.max_bytes;
  config.shm = common.shm;
  config.gloo = flags.GetBool("gloo");
  ASSIGN_OR_RETURN(config.iterations, flags.GetInt("iterations", 0, 1000000));
  ASSIGN_OR_RETURN(config.ring.chunk_bytes, flags.GetInt("ring_chunk_bytes", 8, int64_t{1} << 30));
  ASSIGN_OR_RETURN(config.ring.slots, flags.GetInt("ring_slots", 1, 1024));
  ASSIGN_OR_RETURN(int64_t spin, flags.GetInt("ring_spin_us", 0, 10 * 1000 * 1000));
  config.ring.wait_spin = std::chrono::microseconds(spin);
  config.ring.wait_poll = flags.GetBool("ring_poll");
  config.ring_user_buffer = flags.GetBool("ring_user_buffer");
  if (flags.Has("calibration")) {
    const std::string path = flags.Get("calibration");
    Calibration calibration;
    Status read = ReadTextProto(path, &calibration);
    if (read.ok()) read = cost::ValidateCalibration(calibration, path);
    if (!read.ok()) return read.WithContext("flag '--calibration' '" + path + "'");
    config.tables = std::make_shared<cost::CostTables>(calibration);
  }
  config.time_ring = config.exchange = config.doubling = config.scatter_gather = false;
  for (const std::string& name : SplitList(flags.Get("algorithms"))) {
    if (name == "exchange") {
      config.exchange = true;
    } else if (name == "doubling") {
      config.doubling = true;
    } else if (name == "sg") {
      config.scatter_gather = true;
    } else if (name == "ring") {
      config.time_ring = true;
    } else {
      return InvalidArgumentError("flag '--algorithms' names an unknown all-reduce '", name,
                                  "' (ring, exchange, doubling or sg)");
    }
  }
  config.mpi_bench = flags.Get("mpi_bench");
  ASSIGN_OR_RETURN(config.mpi_variants, ParseMpiVariants(flags.Get("mpi_variant")));
  if (!config.mpi_bench.empty()) {
    config.mpi_btls = SplitList(flags.Get("mpi_btl"));
    for (const std::string& btl : config.mpi_btls) {
      if (MpiBtlOptions(btl).empty()) {
        return InvalidArgumentError("flag '--mpi_btl' names an unknown transport '", btl,
                                    "' (vader or tcp)");
      }
    }
  }
  if (!flags.Has("addrs")) {
    ASSIGN_OR_RETURN(int64_t nproc, flags.GetInt("nproc", 0, 64));
    options.worlds =
        nproc > 0 ? std::vector<int>{static_cast<int>(nproc)} : std::vector<int>{2, 3, 4};
    config.providers =
        common.providers.empty() ? std::vector<std::string>{"tcp", "shm"} : common.providers;
    return options;
  }
  config.addrs = SplitList(flags.Get("addrs"));
  config.world = static_cast<int>(config.addrs.size());
  if (config.world == 0) return InvalidArgumentError("flag '--addrs' names no address");
  if (!flags.Has("rank")) return InvalidArgumentError("--addrs needs --rank");
  ASSIGN_OR_RETURN(options.rank, flags.GetInt("rank", 0, config.world - 1));
  if (!config.mpi_bench.empty()) {
    return InvalidArgumentError("--mpi_bench runs on one host only, not with --addrs");
  }
  ASSIGN_OR_RETURN(config.control_port, flags.GetInt("port", 1, 65535));
  config.providers = common.providers.empty() ? std::vector<std::string>{"tcp"} : common.providers;
  config.gloo_dir = flags.Has("gloo_dir")
                        ? flags.Get("gloo_dir")
                        : "/tmp/oflite-gloo-" + std::to_string(config.control_port);
  return options;
}

int Run(const Options& options) {
  if (!options.config.addrs.empty()) {
    const Config& config = options.config;
    if (options.rank == 0) {
      // Before the rendezvous exists, so no rank has written to it yet.
      const std::string reset = "rm -rf '" + config.gloo_dir + "' && mkdir -p '" +
                                config.gloo_dir + "'";
      if (std::system(reset.c_str()) != 0) return 1;
    }
    return RunRank(options.rank, config);
  }
  int failed = 0;
  for (int world : options.worlds) {
    Config config = options.config;
    config.world = world;
    config.control_port = FreePort();
    char directory[] = "/tmp/oflite-gloo-XXXXXX";
    if (::mkdtemp(directory) == nullptr) return 1;
    config.gloo_dir = directory;
    failed |= RunRanks(world, [&](int rank) { return RunRank(rank, config); });
    std::string cleanup = std::string("rm -rf ") + directory;
    if (std::system(cleanup.c_str()) != 0) failed = 1;
  }
  return failed;
}

}  // namespace
}  // namespace bench
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite::bench;
  return BenchMain(argc, argv, "allreduce_bench", kUsage, FlagSpecs(), ReadOptions, Run);
}
