#include "oneflow_lite/kernels/cpu/cpu_threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "oneflow_lite/kernels/cpu/vec/vec.h"

// OpenBLAS's own API (cblas.h declares it too, but not every cblas.h does).
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char* openblas_get_corename(void);
}

namespace oflite {

int AvailableCpuCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

StatusOr<int> ResolveCpuThreads(int requested, int cpu_devices, int cores,
                                const std::string& source) {
  if (requested < 0 || requested > kMaxCpuThreads) {
    return InvalidArgumentError(source, " ", requested, " is out of range: 0 (the cores divided "
                                "among the CPU devices) or 1..", kMaxCpuThreads);
  }
  if (requested > 0) return requested;
  return std::max(1, cores / std::max(1, cpu_devices));
}

namespace {
std::mutex& BlasMutex() {
  static std::mutex mutex;
  return mutex;
}
std::atomic<int> g_threads_setting{0};
}  // namespace

void SetCpuComputeThreads(int threads) {
  std::lock_guard<std::mutex> lock(BlasMutex());
  const int wanted = std::max(1, threads);
  g_threads_setting.store(wanted);
  if (openblas_get_num_threads() != wanted) openblas_set_num_threads(wanted);
}

int CpuComputeThreads() {
  std::lock_guard<std::mutex> lock(BlasMutex());
  return openblas_get_num_threads();
}

int CpuComputeThreadsSetting() { return g_threads_setting.load(); }

namespace {

// Instruction-set width of an OpenBLAS x86 kernel family: 1 SSE, 2 AVX,
// 3 AVX2, 4 AVX-512; 0 for names not ranked here.
int CoreWidth(const std::string& core) {
  static const char* const kWidths[][2] = {
      {"Prescott", "1"},   {"Core2", "1"},     {"Penryn", "1"},      {"Dunnington", "1"},
      {"Nehalem", "1"},    {"Atom", "1"},      {"Sandybridge", "2"}, {"Haswell", "3"},
      {"Zen", "3"},        {"SkylakeX", "4"},  {"Cooperlake", "4"},  {"SapphireRapids", "4"}};
  for (const auto& entry : kWidths) {
    if (core == entry[0]) return entry[1][0] - '0';
  }
  return 0;
}

}  // namespace

std::string PreferredOpenBlasCore() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  std::string wanted;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    wanted = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    wanted = "Haswell";
  }
  const char* current = openblas_get_corename();
  const int width = CoreWidth(current != nullptr ? current : "");
  if (wanted.empty() || width == 0 || width >= CoreWidth(wanted)) return "";
  return wanted;
#else
  return "";
#endif
}

std::string CpuComputeDescription() {
  std::lock_guard<std::mutex> lock(BlasMutex());
  const char* core = openblas_get_corename();
  return std::string("OpenBLAS core ") + (core != nullptr ? core : "?") + ", " +
         std::to_string(openblas_get_num_threads()) + " BLAS thread(s); own kernels " +
         vec::IsaName(vec::Active().isa);
}

}  // namespace oflite
