// Shared by the CPU training benchmarks (train_mlp, train_cnn): runs one
// model through compiler + actor runtime and the PyTorch peer
// (train_cpu_torch.py) with the same number of computing threads, samples
// interleaved (ours, peer, ours, peer, ...) so load drifts hit both, and
// prints medians with CPU time (user+sys) beside wall time and the load
// average. Not a library for anything else: a benchmark's helpers.
//
// Threads counted as computing: ours = CPU devices x cpu_threads (each
// device's stream thread plus its BLAS workers; the runtime's other threads
// only pass messages); the peer = torch.set_num_threads(cores) with
// torch.set_num_interop_threads(1). Both report every thread of the process
// ("proc thr") as well, so idle helper threads are visible too.
#ifndef TOOLS_BENCH_TRAIN_BENCH_UTIL_H_
#define TOOLS_BENCH_TRAIN_BENCH_UTIL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace bench {

// Adds the model's data source, layers, loss and optimizer to `g` for a
// global batch of `batch` (synthetic data regenerated every step).
using ModelBuilder = std::function<void(Graph* g, int64_t batch)>;

struct BenchModel {
  std::string name;        // "mlp", "cnn", "lenet5": also the peer's --model
  std::string description;  // one line for the header
  ModelBuilder build;
};

struct BenchOptions {
  std::vector<int64_t> batches = {64};
  std::vector<int> cores = {1, 2};
  int samples = 5;
  int64_t warmup = 10;
  int64_t iters = 100;
  std::string python = "/usr/bin/python3";
  std::string torch_script;  // default: tools/bench/train_cpu_torch.py
  // 2 cores: "dp" (2 CPU devices x 1 thread, data parallel), "threads"
  // (1 device x 2 threads) or "both" (a row each).
  std::string layout = "both";
  bool fuse = true;  // compiler::CompileOptions::fuse
};

// Parses the common flags (cli::FlagSet; `options` holds the defaults, the
// values given replace them). Returns the exit code to end with: 0 after
// --help (`program` and `about` head the help), 2 after a bad flag or value
// (named on stderr); nullopt: run. May re-execute the program for
// --openblas_coretype (tools/oflite/openblas_core.h).
std::optional<int> ParseBenchFlags(int argc, char** argv, const std::string& program,
                                   const std::string& about, BenchOptions* options);

// Runs every (model, batch, cores, layout) row and prints the table.
// Returns the process exit code (1 if our runtime failed).
int RunBench(const std::vector<BenchModel>& models, const BenchOptions& options);

}  // namespace bench
}  // namespace oflite

#endif  // TOOLS_BENCH_TRAIN_BENCH_UTIL_H_
