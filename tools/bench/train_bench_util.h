// Shared by the CPU training benchmarks (train_mlp, train_cnn): runs one
// model through compiler + actor runtime and the PyTorch peer
// (train_cpu_torch.py) within the same core budget, samples interleaved
// (ours, peer settings, ours, ...; the order rotates every round) so load
// drifts hit every side, and prints medians with CPU time (user+sys) beside
// wall time and the load average.
//
// A budget of C cores: both sides are pinned to the same C CPUs (the first
// C this process may run on) and compute with at most C threads each way:
// ours = CPU devices x cpu_threads (each device's stream thread plus its
// BLAS workers; the runtime's other threads only pass messages); the peer
// runs every setting torch.set_num_threads(t) x OPENBLAS_NUM_THREADS=b
// with 1 <= t, b <= C (one interop thread), and each row holds ours against
// the peer's best setting, printed by name ("torch 1 x blas 2"), with the
// whole sweep below it. PyTorch's matmuls run on OpenBLAS's pool, not on
// its OpenMP team, so its best setting need not be t = b = C: at 2 cores
// that puts 4 threads on 2 cores. Both sides report every thread of the
// process ("thr") as well, so idle helper threads are visible too.
//
// Not a library for anything else: a benchmark's helpers.
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
  std::string name;         // "mlp", "cnn", "lenet5", "resnet": also the peer's --model
  std::string description;  // one line for the header
  ModelBuilder build;
  // The model's own batch sizes (e.g. its example's), used unless --batches
  // is given; empty: BenchOptions::batches.
  std::vector<int64_t> batches;
};

struct BenchOptions {
  std::vector<int64_t> batches = {64};
  bool batches_given = false;  // --batches on the command line: every model runs them
  // The bench's models by name, set by its main before ParseBenchFlags: with
  // more than one, --models picks some (default all) and this holds those.
  std::vector<std::string> models;
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
  // The peer's settings at C cores: "all" (every t, b in 1..C), "diag"
  // (t = b, 1..C) or "auto" (all up to 2 cores, diag above: C^2 settings
  // of ~1 s start-up each make wide budgets long).
  std::string peer_configs = "auto";
  int64_t peer_timeout_s = 600;  // one peer run, start-up included
};

// Parses the common flags (cli::FlagSet; `options` holds the defaults, the
// values given replace them). Returns the exit code to end with: 0 after
// --help (`program` and `about` head the help), 2 after a bad flag or value
// (named on stderr); nullopt: run. May re-execute the program for
// --openblas_coretype (tools/oflite/openblas_core.h).
std::optional<int> ParseBenchFlags(int argc, char** argv, const std::string& program,
                                   const std::string& about, BenchOptions* options);

// Runs every (model, batch, cores) group of the models named in
// options.models (all when empty) (ours in each layout, the peer in each
// setting, interleaved) and prints its rows, the last step's loss of both
// sides and the peer's sweep.
// Returns the process exit code (1 if our runtime failed or pinning did).
int RunBench(const std::vector<BenchModel>& models, const BenchOptions& options);

}  // namespace bench
}  // namespace oflite

#endif  // TOOLS_BENCH_TRAIN_BENCH_UTIL_H_
