// Binding the ranks of one host to disjoint sets of cores.
//
// Every CommNet rank runs at least two busy threads (its caller and its
// transport's progress thread) and a CPU device computes with a team sized
// to the CPUs the process may use (kernels/cpu/cpu_threads.h). Left to the
// scheduler, the ranks of one host migrate between cores: a message read
// by a progress thread on one core is then reduced by its caller on
// another, and two ranks' compute teams each size themselves to the whole
// machine. Binding gives each local rank its own share of the cores, so
// its threads share that core's caches and its compute team sizes itself
// to its share (sched_getaffinity).
//
// Policies (`oflite launch --bind`, the benchmarks' --bind):
//   auto   bind when every core gets the same load. With local_size <=
//          cores each rank gets cores [r*C/L, (r+1)*C/L) (all of them
//          shared out, whole cores with their SMT siblings); with more
//          ranks than cores and local_size a multiple of the cores, rank r
//          gets core r mod C (each core L/C ranks, each rank staying on
//          its core); otherwise nothing is bound: some core would carry
//          one rank more than another, and a job of synchronous steps
//          runs at its slowest rank's pace, while the scheduler spreads
//          unbound ranks evenly. At 2 ranks per 2 cores this is what
//          OpenMPI's mpirun does by default (bind to core).
//   cores  as auto, and with uneven oversubscription too: rank r on core
//          r mod C.
//   none   nothing is bound (the scheduler places every thread).
//
// Cores are the CPUs this process may run on (its own affinity mask, so a
// taskset or cgroup limit of the launcher is kept), grouped by
// /sys/devices/system/cpu/cpuN/topology (package and core id); without
// that directory every CPU is its own core.
#ifndef ONEFLOW_LITE_COMM_LAUNCH_CPU_BINDING_H_
#define ONEFLOW_LITE_COMM_LAUNCH_CPU_BINDING_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {

enum class BindPolicy { kAuto, kCores, kNone };

// "auto", "cores" or "none"; InvalidArgument naming `source` (e.g.
// "--bind") otherwise.
StatusOr<BindPolicy> ParseBindPolicy(const std::string& text, const std::string& source);
const char* BindPolicyName(BindPolicy policy);

// The CPUs the calling thread may run on (its affinity mask), ascending;
// at least the CPU it runs on.
std::vector<int> AllowedCpus();

// The cores this process may run on: each entry the CPU numbers of one core
// (ascending), cores in ascending order of their first CPU. `sysfs_root`
// is the directory holding cpuN/topology (a test passes its own tree).
// Never empty when the process runs (at least the CPU it runs on).
std::vector<std::vector<int>> AllowedCores(
    const std::string& sysfs_root = "/sys/devices/system/cpu");

// Groups `cpus` into cores by the topology under `sysfs_root` (as
// AllowedCores, for a given CPU set).
std::vector<std::vector<int>> GroupIntoCores(
    const std::vector<int>& cpus, const std::string& sysfs_root = "/sys/devices/system/cpu");

// The CPUs local rank `local_rank` of `local_size` gets under `policy` from
// `cores` (see the file comment); empty: leave it unbound.
std::vector<int> CpusForLocalRank(const std::vector<std::vector<int>>& cores, int local_rank,
                                  int local_size, BindPolicy policy);

// Restricts process `pid` (0: the calling thread, which the threads and
// children it starts afterwards inherit) to `cpus`. Empty `cpus`: nothing
// to do. Unavailable naming the CPUs and the reason on failure.
Status BindToCpus(pid_t pid, const std::vector<int>& cpus);

// "0-3,8,10-11"; "" for none.
std::string DescribeCpus(const std::vector<int>& cpus);

// What binding `rank_cpus` (CpusForLocalRank per rank) does, for a log
// line: "rank 0 on CPUs 0, rank 1 on CPUs 1", or "ranks unbound (--bind
// none)", or "ranks unbound (3 ranks, 2 cores)".
std::string DescribeBinding(const std::vector<std::vector<int>>& rank_cpus, BindPolicy policy,
                            size_t cores);

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_LAUNCH_CPU_BINDING_H_
