// OpenMPI as a peer of allreduce_bench, sample by sample: one sample is one
// `mpirun` of mpi_allreduce_bench (compiled by `mpi_allreduce_bench.sh
// --compile_to=PATH`) for a single size with --repeats=1, so it times the
// same `iterations` back-to-back MPI_Allreduce calls as one CommNet sample
// (after its own warm-up and check), and the bench can alternate CommNet,
// Gloo and OpenMPI samples of one size: load drift hits all of them.
//
// Variants: MPI_Allreduce in place (MPI_IN_PLACE, as our algorithms and
// Gloo's run) and out of place (separate send and receive buffers, the
// common call, which OpenMPI runs faster at some sizes and transports). One
// mpirun times one sample of each variant asked for, back to back, the
// first one alternating by sample; the bench holds ours against the better.
//
// Transports: "vader" (shared memory, the peer of the shm provider) and
// "tcp" (its TCP BTL on loopback only, the peer of the tcp provider).
// A sample that fails (mpirun missing or failing, unparsable output)
// returns negative values and says why on stderr; the bench prints "-"
// for a size without a good sample. Blocking: as long as the mpirun (start-up
// included, about half a second); nothing outlives it.
#ifndef TOOLS_BENCH_MPI_PEER_H_
#define TOOLS_BENCH_MPI_PEER_H_

#include <array>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "tools/bench/comm_bench_util.h"

namespace oflite {
namespace bench {

// The mpirun options that select `btl` ("vader" or "tcp"); empty for others.
inline std::string MpiBtlOptions(const std::string& btl) {
  if (btl == "vader") return "--mca btl self,vader";
  if (btl == "tcp") return "--mca btl self,tcp --mca btl_tcp_if_include lo";
  return "";
}

// MPI_Allreduce's variants, indexes of MpiSample.
enum MpiVariant { kMpiInPlace = 0, kMpiOutOfPlace = 1, kMpiVariants = 2 };

// busbw (MB/s) of one sample per variant; negative: not run, or failed.
using MpiSample = std::array<double, kMpiVariants>;

// The column mpi_allreduce_bench.c prints for `variant`, and the short name
// the bench's tables use ("ip", "oop").
inline const char* MpiVariantColumn(int variant) {
  return variant == kMpiInPlace ? "in-place" : "out-of-place";
}
inline const char* MpiVariantShort(int variant) {
  return variant == kMpiInPlace ? "ip" : "oop";
}

// The variants --mpi_variant names: "both" (default), "in_place" or
// "out_of_place", as mpi_allreduce_bench.c's --variant.
inline StatusOr<std::vector<int>> ParseMpiVariants(const std::string& value) {
  if (value == "both") return std::vector<int>{kMpiInPlace, kMpiOutOfPlace};
  if (value == "in_place") return std::vector<int>{kMpiInPlace};
  if (value == "out_of_place") return std::vector<int>{kMpiOutOfPlace};
  return InvalidArgumentError("flag '--mpi_variant' must be both, in_place or out_of_place, got '",
                              value, "'");
}

// busbw (MB/s) per variant that mpi_allreduce_bench printed for `bytes` in
// `output`: the row "<size name> <figure>..." of its all-reduce table, each
// figure under the column its "size ..." header names; negative for a
// variant without a column or figure.
inline MpiSample MpiRowBusbw(const std::string& output, size_t bytes) {
  MpiSample busbw;
  busbw.fill(-1);
  const size_t table = output.find("OpenMPI MPI_Allreduce busbw");
  if (table == std::string::npos) return busbw;
  std::istringstream lines(output.substr(table));
  std::string line;
  std::vector<std::string> columns;  // after "size"
  const std::string name = SizeName(bytes);
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string word;
    if (columns.empty()) {
      if (!(words >> word) || word != "size") continue;
      while (words >> word) columns.push_back(word);
      continue;
    }
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size() ||
        line[name.size()] != ' ') {
      continue;
    }
    std::istringstream figures(line.substr(name.size()));
    for (const std::string& column : columns) {
      if (!(figures >> word)) break;
      for (int variant = 0; variant < kMpiVariants; ++variant) {
        if (column != MpiVariantColumn(variant)) continue;
        char* end = nullptr;
        const double value = std::strtod(word.c_str(), &end);
        if (*end == '\0' && value > 0) busbw[variant] = value;
      }
    }
    break;
  }
  return busbw;
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

// One OpenMPI sample of each of `variants`: busbw in MB/s of `world`
// processes all-reducing `bytes` over `btl` (negative for a variant not
// asked for or without a figure). The out-of-place variant samples first
// when `out_of_place_first`; `iterations` > 0 overrides its ops per
// sample. mpirun starts with the launcher's CPUs and binds its ranks as
// MpiBindOptions says.
inline MpiSample MpiAllReduceSample(const std::string& program, const std::string& btl, int world,
                                    size_t bytes, const std::vector<int>& variants,
                                    bool out_of_place_first, int iterations = 0) {
  MpiSample failed;
  failed.fill(-1);
  const std::string options = MpiBtlOptions(btl);
  if (options.empty()) {
    std::fprintf(stderr, "mpi peer: unknown transport '%s' (vader or tcp)\n", btl.c_str());
    return failed;
  }
  const char* variant = variants.size() == 1 ? (variants[0] == kMpiInPlace ? "in_place"
                                                                            : "out_of_place")
                                             : "both";
  const std::string command = "mpirun --allow-run-as-root --oversubscribe -np " +
                              std::to_string(world) + " " + MpiBindOptions(world) + " " +
                              options + " '" + program +
                              "' --repeats=1 --p2p=0 --min_bytes=" + std::to_string(bytes) +
                              " --max_bytes=" + std::to_string(bytes) + " --variant=" + variant +
                              " --out_of_place_first=" + (out_of_place_first ? "1" : "0") +
                              " --iterations=" + std::to_string(iterations) +
                              " 2>&1";
  int status = 0;
  std::string output;
  {
    ScopedCpus launcher({});
    output = RunCaptured(command, &status);
  }
  const MpiSample busbw = MpiRowBusbw(output, bytes);
  for (int v : variants) {
    if (status != 0 || busbw[v] < 0) {
      std::fprintf(stderr, "mpi peer: %s failed (status %d; no %s figure): %s\n", command.c_str(),
                   status, MpiVariantColumn(v), output.substr(0, 400).c_str());
      return failed;
    }
  }
  return busbw;
}

}  // namespace bench
}  // namespace oflite

#endif  // TOOLS_BENCH_MPI_PEER_H_
