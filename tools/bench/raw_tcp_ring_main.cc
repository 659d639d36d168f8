// raw_tcp_ring's command line (the ring itself: raw_tcp_ring.c, in C).
#include <string>
#include <vector>

#include "oneflow_lite/session/flags.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/raw_tcp_ring.h"

namespace oflite {
namespace {

// After "usage: ... <program>" in --help.
constexpr char kUsage[] =
    "[flags]\n\nThe floor of a 2-process all-reduce over loopback TCP: the ring's 2-rank "
    "schedule over\none socket, ranks bound to CPUs 0 and 1; per repeat and median, time per "
    "op and busbw.";

std::vector<cli::FlagSpec> FlagSpecs() {
  return {{"bytes", "bytes per all-reduce (rounded down to a multiple of 8)", false,
           std::to_string(1 << 20)},
          {"iterations", "all-reduces per repeat", false, "200"},
          {"repeats", "repeats (the median is printed)", false, "5"},
          {"lowat", "SO_RCVLOWAT on both sockets (0: the kernel's default of 1)", false, "0"},
          {"quickack", "TCP_QUICKACK after every read that returned data", true, "false"}};
}

StatusOr<raw_tcp_ring_options> ReadOptions(const cli::FlagSet& flags) {
  raw_tcp_ring_options options{};
  ASSIGN_OR_RETURN(options.bytes, flags.GetInt("bytes", 8, int64_t{1} << 32));
  ASSIGN_OR_RETURN(options.iterations, flags.GetInt("iterations", 1, 1000 * 1000 * 1000));
  ASSIGN_OR_RETURN(options.repeats, flags.GetInt("repeats", 1, RAW_TCP_RING_MAX_REPEATS));
  ASSIGN_OR_RETURN(options.lowat, flags.GetInt("lowat", 0, 1 << 30));
  options.quickack = flags.GetBool("quickack");
  return options;
}

int Run(const raw_tcp_ring_options& options) { return raw_tcp_ring_run(&options); }

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite;
  return bench::BenchMain(argc, argv, "raw_tcp_ring", kUsage, FlagSpecs(), ReadOptions, Run);
}
