// OpenMPI as a peer of allreduce_bench, sample by sample: one sample is one
// `mpirun` of mpi_allreduce_bench (compiled by `mpi_allreduce_bench.sh
// --compile_to=PATH`) for a single size with --repeats=1, so it times the
// same `iterations` back-to-back MPI_Allreduce calls as one CommNet sample
// (after its own warm-up and check), and the bench can alternate CommNet,
// Gloo and OpenMPI samples of one size: load drift hits all of them.
//
// Transports: "vader" (shared memory, the peer of the shm provider) and
// "tcp" (its TCP BTL on loopback only, the peer of the tcp provider).
// A sample that fails (mpirun missing or failing, unparsable output)
// returns a negative value and says why on stderr; the bench prints "-"
// for a size without a good sample. Blocking: as long as the mpirun (start-up
// included, about half a second); nothing outlives it.
#ifndef TOOLS_BENCH_MPI_PEER_H_
#define TOOLS_BENCH_MPI_PEER_H_

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "tools/bench/comm_bench_util.h"

namespace oflite {
namespace bench {

// The mpirun options that select `btl` ("vader" or "tcp"); empty for others.
inline std::string MpiBtlOptions(const std::string& btl) {
  if (btl == "vader") return "--mca btl self,vader";
  if (btl == "tcp") return "--mca btl self,tcp --mca btl_tcp_if_include lo";
  return "";
}

// busbw (MB/s) that mpi_allreduce_bench printed for `bytes` in `output`
// (the row "<size name> <figure>" of its all-reduce table); negative when
// absent.
inline double MpiRowBusbw(const std::string& output, size_t bytes) {
  const std::string name = SizeName(bytes);
  const size_t table = output.find("OpenMPI MPI_Allreduce busbw");
  if (table == std::string::npos) return -1;
  std::istringstream lines(output.substr(table));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size() ||
        line[name.size()] != ' ') {
      continue;
    }
    char* end = nullptr;
    const double value = std::strtod(line.c_str() + name.size(), &end);
    return end != line.c_str() + name.size() && value > 0 ? value : -1;
  }
  return -1;
}

// mpirun's binding options matching the bench's own ranks (--bind): bound
// to one core each, "--bind-to core" (mpirun's own default at 2 ranks);
// to k cores each, k PEs per rank; several ranks per core, round-robin
// over the cores ("overload-allowed": mpirun maps rank r to core r mod C
// as we do); unbound (or shares of unequal size), "--bind-to none"
// (mpirun's default when oversubscribed).
inline std::string MpiBindOptions(int world) {
  const std::vector<int> first = RankCpus(0, world);
  if (first.empty()) return "--bind-to none";
  const size_t cores = Binding().cores.size();
  if (static_cast<size_t>(world) > cores) return "--bind-to core:overload-allowed";
  if (cores % world != 0) return "--bind-to none";
  const size_t per_rank = cores / world;
  if (per_rank == 1) return "--bind-to core";
  return "--map-by slot:PE=" + std::to_string(per_rank) + " --bind-to core";
}

// One OpenMPI sample: busbw in MB/s of `world` processes all-reducing
// `bytes` over `btl`, or negative. mpirun starts with the launcher's CPUs
// and binds its ranks as MpiBindOptions says.
inline double MpiAllReduceSample(const std::string& program, const std::string& btl, int world,
                                 size_t bytes) {
  const std::string options = MpiBtlOptions(btl);
  if (options.empty()) {
    std::fprintf(stderr, "mpi peer: unknown transport '%s' (vader or tcp)\n", btl.c_str());
    return -1;
  }
  const std::string command = "mpirun --allow-run-as-root --oversubscribe -np " +
                              std::to_string(world) + " " + MpiBindOptions(world) + " " +
                              options + " '" + program +
                              "' --repeats=1 --p2p=0 --min_bytes=" + std::to_string(bytes) +
                              " --max_bytes=" + std::to_string(bytes) + " 2>&1";
  int status = 0;
  std::string output;
  {
    ScopedCpus launcher({});
    output = RunCaptured(command, &status);
  }
  const double busbw = MpiRowBusbw(output, bytes);
  if (status != 0 || busbw < 0) {
    std::fprintf(stderr, "mpi peer: %s failed (status %d): %s\n", command.c_str(), status,
                 output.substr(0, 400).c_str());
    return -1;
  }
  return busbw;
}

}  // namespace bench
}  // namespace oflite

#endif  // TOOLS_BENCH_MPI_PEER_H_
