// Sharing a host's CPUs among the ranks that were started on it unbound.
//
// Ranks started by hand (`oflite run --rank R ...`), or by a launcher that
// does not bind, may each run on every CPU of the host. Each then sizes its
// compute threads (its CPU devices, OpenBLAS, oneDNN's OpenMP team:
// kernels/cpu/cpu_threads.h) to all of them, so L ranks run L teams on the
// same cores, and the scheduler tends to pull ranks that wake each other
// (every message does) onto one core. Measured on 2 cores with 2 ranks of
// a data-parallel MLP: 2x slower than one core per rank, 12-15x with a
// wider MLP whose OpenMP teams spin (tools/bench/unbound_ranks.py). Limiting
// each rank to one compute thread removes the spinning but leaves 2x (the
// two ranks still mostly take turns on one core); binding each rank to its
// own core gives the bound figures (0.98-1.03x), so `auto` binds when it
// may. With the threads limited, OMP_WAIT_POLICY=passive changed nothing
// measurable (a team of one thread never waits), so nothing sets it.
//
// After the rendezvous every rank publishes a key naming the CPUs it may
// use (its host identity and its affinity mask; ExchangeCpuShareKeys).
// Ranks with equal keys compete for the same CPUs: the "local" ranks, in
// order of global rank. DecideHostShare then picks, per --share-host:
//   auto     bind as below while the mask is the whole machine's (its
//            cgroup's cpuset: MachineCpuCount); a narrower mask is the
//            user's or the launcher's choice and is kept: limit threads;
//   bind     bind to this local rank's share of the cores of the shared
//            mask (a narrower one too), the rule of `oflite launch --bind
//            auto` (cpu_binding.h) when every core gets the same load;
//            otherwise limit threads, saying why;
//   threads  leave the affinity; each rank's compute threads become
//            floor(CPUs / local ranks) (at least 1), divided among its CPU
//            devices, unless --cpu-threads or the plan's cpu_threads is set;
//   off      nothing (the behaviour before this existed).
// A rank alone on its CPUs (bound by `oflite launch`, Slurm or mpirun, or
// the only rank on its host) does nothing. Binding covers every thread the
// process already has (transport progress threads, OpenBLAS's pool), and
// threads started later inherit it; the runtime then sizes its compute
// threads to the bound CPUs as it does under taskset.
#ifndef ONEFLOW_LITE_COMM_LAUNCH_HOST_SHARE_H_
#define ONEFLOW_LITE_COMM_LAUNCH_HOST_SHARE_H_

#include <chrono>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {
namespace control {
class ControlClient;
}  // namespace control

enum class ShareHostMode { kAuto, kThreads, kBind, kOff };

// "auto", "threads", "bind" or "off"; InvalidArgument naming `source`
// (e.g. "--share-host") otherwise.
StatusOr<ShareHostMode> ParseShareHostMode(const std::string& text, const std::string& source);
const char* ShareHostModeName(ShareHostMode mode);

// "<host id>|<CPUs>": equal for two ranks exactly when they share a host
// (`host_id`, e.g. comm::DefaultHostIdentity()) and may run on the same CPUs.
std::string CpuShareKey(const std::string& host_id, const std::vector<int>& allowed_cpus);

// Publishes `key` as this rank's and returns every rank's key in rank
// order (`world` keys), waiting up to `timeout` for each (failing early
// naming a rank that left). Every rank calls it, whatever its mode, so no
// rank waits for a peer that does not share.
StatusOr<std::vector<std::string>> ExchangeCpuShareKeys(control::ControlClient* control, int rank,
                                                        int world, const std::string& key,
                                                        std::chrono::milliseconds timeout);

// "0-3,8,10-11" (a kernel CPU list, as in cpuset files) as CPU numbers,
// ascending; InvalidArgument naming `source` for anything else.
StatusOr<std::vector<int>> ParseCpuList(const std::string& text, const std::string& source);

// How many CPUs the whole of this process's world has: its cgroup's cpuset
// (v2 cpuset.cpus.effective, v1 cpuset.effective_cpus), so a container
// limited to some CPUs counts as the machine; the online CPUs when no
// cpuset can be read. `root` prefixes /proc and /sys (tests pass a tree).
int MachineCpuCount(const std::string& root = "");

struct HostShareInput {
  ShareHostMode mode = ShareHostMode::kAuto;
  int rank = 0;
  std::vector<std::string> keys;        // every rank's CpuShareKey, in rank order
  std::vector<int> allowed_cpus;        // this rank's affinity mask
  int online_cpus = 0;                  // MachineCpuCount(); 0: unknown
  std::vector<std::vector<int>> cores;  // allowed_cpus grouped into cores
  int cpu_devices = 1;                  // this rank's CPU devices (plan)
  // --cpu-threads, else the plan's cpu_threads for this machine; 0: none.
  int requested_threads = 0;
  std::string requested_source;  // e.g. "--cpu-threads"
};

struct HostShare {
  int local_rank = 0;  // among the ranks with this rank's key
  int local_size = 1;
  // CPUs to bind this process to; empty: leave the affinity.
  std::vector<int> bind_cpus;
  // Threads per CPU device for the runtime (RuntimeOptions::cpu_threads);
  // 0: leave it to the request or the runtime's default.
  int cpu_threads = 0;
  // What was decided, for one log line ("2 ranks share CPUs 0-1: bound to
  // CPU 1 (--share-host auto)").
  std::string description;
};

// The decision for `input` (see the file comment). Pure: reads nothing.
HostShare DecideHostShare(const HostShareInput& input);

// Restricts every thread of this process (/proc/self/task) to `cpus`, and
// with them the threads they start. Unavailable naming the CPUs and the
// thread on failure; nothing for empty `cpus`.
Status BindAllThreads(const std::vector<int>& cpus);

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_LAUNCH_HOST_SHARE_H_
