// How far the caches carry a kernel's tensors (the cost model's cache
// term, docs/simulate.md "Tensors out of cache"):
//
//   * EvictFromCaches writes back and drops a buffer's lines from every
//     cache level, so that the next touch comes from memory. The kernel
//     profiler times each large kernel a second way with its tensors
//     evicted (KernelCost.cold_us): inside a real step other work often
//     passes through the caches between a tensor's writer and its reader,
//     and a kernel that streams 50 MB then runs at memory speed, twice its
//     time in cache on the 2-core VM.
//   * ProfileCacheBytes measures how many recently touched bytes the caches
//     keep for one core (RuntimeCost.cache_bytes): an element-wise add
//     streams through working sets of growing size, each pass over data the
//     previous pass touched; the figure is the working set at which a byte
//     costs halfway between its cost in cache (the smallest set) and its
//     cost from memory (the same pass over evicted buffers). On a VM this
//     is what the host's other tenants leave of the last-level cache, not
//     the size lscpu reports.
//
// Plain functions; no shared state.
#ifndef ONEFLOW_LITE_PROFILE_CACHE_PROFILER_H_
#define ONEFLOW_LITE_PROFILE_CACHE_PROFILER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace profile {

// True where this build can evict lines (x86-64: clflush); elsewhere
// EvictFromCaches does nothing and cold times are not measured.
bool CanEvictFromCaches();

// Writes back and invalidates every cache line of [data, data + bytes).
void EvictFromCaches(const void* data, size_t bytes);

struct CacheProfileOptions {
  // Working sets tried, doubling from the smallest to the largest (bytes).
  int64_t min_bytes = int64_t{4} << 20;
  int64_t max_bytes = int64_t{512} << 20;
  int passes = 5;  // timed passes per working set; the median is kept
};

struct CacheProfile {
  double cache_bytes = 0;  // the figure (RuntimeCost.cache_bytes)
  // Nanoseconds per byte of each working set, and from memory.
  std::vector<std::pair<int64_t, double>> ns_per_byte;
  double cold_ns_per_byte = 0;
};

// Runs on the calling thread where it is bound; blocks for about a
// second and allocates max_bytes. Unavailable when lines
// cannot be evicted (CanEvictFromCaches) or the speed in cache and from
// memory do not differ by 10 % (the figure would be noise); InvalidArgument
// for bad options. When even the largest set runs nearer cache speed than
// memory speed, the figure is max_bytes.
StatusOr<CacheProfile> ProfileCacheBytes(const CacheProfileOptions& options);

// The size of the largest data or unified cache the kernel lists for cpu0
// under `sysfs_cpu0_cache` (index*/level, type, size as "32768K"), in
// bytes: what `oflite profile` states as cache_bytes where the probe above
// cannot tell a byte in cache from one in memory (on the AMD EPYC VM an
// add streams from memory as fast as from its last-level cache, while the
// kernels' own cold times still differ: a 16 MiB matmul weight 1.4 ms warm,
// 2.3 ms evicted, 2.7 ms inside a 4-rank run). The cold extra is measured
// per kernel (KernelCost.cold_us), so where memory is as fast as cache the
// term stays near zero whatever the size. NotFound when no size is listed.
StatusOr<double> LastLevelCacheBytes(
    const std::string& sysfs_cpu0_cache = "/sys/devices/system/cpu/cpu0/cache");

}  // namespace profile
}  // namespace oflite

#endif  // ONEFLOW_LITE_PROFILE_CACHE_PROFILER_H_
