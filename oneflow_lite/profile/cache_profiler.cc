#include "oneflow_lite/profile/cache_profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace oflite {
namespace profile {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kLine = 64;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// c = a + b over `n` floats: the pass whose cost per byte is measured (an
// element-wise kernel's access pattern: two streams read, one written).
void AddPass(const float* a, const float* b, float* c, size_t n) {
  for (size_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

}  // namespace

bool CanEvictFromCaches() {
#if defined(__x86_64__)
  return true;
#else
  return false;
#endif
}

void EvictFromCaches(const void* data, size_t bytes) {
#if defined(__x86_64__)
  if (data == nullptr || bytes == 0) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(uintptr_t{kLine} - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
  for (uintptr_t p = begin; p < end; p += kLine) _mm_clflush(reinterpret_cast<const void*>(p));
  _mm_mfence();
#else
  (void)data;
  (void)bytes;
#endif
}

StatusOr<CacheProfile> ProfileCacheBytes(const CacheProfileOptions& options) {
  if (options.min_bytes < (int64_t{1} << 16) || options.max_bytes < options.min_bytes ||
      options.passes < 1) {
    return InvalidArgumentError("cache profile: need 64 KiB <= min_bytes <= max_bytes and passes "
                                ">= 1 (got ", options.min_bytes, ", ", options.max_bytes, ", ",
                                options.passes, ")");
  }
  if (!CanEvictFromCaches()) {
    return UnavailableError("cache profile: this CPU has no cache-flush instruction in this build");
  }
  const size_t max_floats = static_cast<size_t>(options.max_bytes / 3 / sizeof(float));
  std::unique_ptr<float[]> a(new float[max_floats]), b(new float[max_floats]),
      c(new float[max_floats]);
  for (size_t i = 0; i < max_floats; ++i) {
    a[i] = static_cast<float>(i & 1023);
    b[i] = 1.0f;
    c[i] = 0.0f;
  }
  // One timed pass over the first `n` floats of each array, ns per byte.
  auto timed = [&](size_t n) {
    const Clock::time_point start = Clock::now();
    AddPass(a.get(), b.get(), c.get(), n);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    return ns / (3.0 * n * sizeof(float));
  };
  CacheProfile profile;
  for (int64_t set = options.min_bytes; set <= options.max_bytes; set *= 2) {
    const size_t n = static_cast<size_t>(set / 3 / sizeof(float));
    for (int i = 0; i < 2; ++i) AddPass(a.get(), b.get(), c.get(), n);  // warm
    std::vector<double> passes;
    for (int p = 0; p < options.passes; ++p) passes.push_back(timed(n));
    profile.ns_per_byte.emplace_back(set, Median(std::move(passes)));
  }
  // From memory: the largest set, evicted before each pass.
  {
    const size_t n = static_cast<size_t>(profile.ns_per_byte.back().first / 3 / sizeof(float));
    std::vector<double> passes;
    for (int p = 0; p < options.passes; ++p) {
      EvictFromCaches(a.get(), n * sizeof(float));
      EvictFromCaches(b.get(), n * sizeof(float));
      EvictFromCaches(c.get(), n * sizeof(float));
      passes.push_back(timed(n));
    }
    profile.cold_ns_per_byte = Median(std::move(passes));
  }
  const double hot = profile.ns_per_byte.front().second;
  const double cold = profile.cold_ns_per_byte;
  if (!(cold > hot * 1.1)) {
    return UnavailableError("cache profile: a byte from memory (", cold,
                            " ns) costs about what one in cache does (", hot,
                            " ns); no cache size can be read from that");
  }
  // The first set is `hot` itself, below `half`: the figure lies past it,
  // between the last set under `half` and the first at or over it
  // (interpolated in log bytes), or is the largest set.
  const double half = (hot + cold) / 2;
  profile.cache_bytes = static_cast<double>(profile.ns_per_byte.back().first);
  for (size_t i = 1; i < profile.ns_per_byte.size(); ++i) {
    const auto& lo = profile.ns_per_byte[i - 1];
    const auto& hi = profile.ns_per_byte[i];
    if (hi.second < half) continue;
    const double t = (half - lo.second) / (hi.second - lo.second);
    const double log_lo = std::log(static_cast<double>(lo.first));
    profile.cache_bytes = std::exp(log_lo + t * (std::log(static_cast<double>(hi.first)) - log_lo));
    break;
  }
  return profile;
}

StatusOr<double> LastLevelCacheBytes(const std::string& sysfs_cpu0_cache) {
  // Reads one line of a sysfs file; empty when it cannot be read.
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
  };
  int best_level = -1;
  double best_bytes = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = sysfs_cpu0_cache + "/index" + std::to_string(index);
    const std::string level = read(dir + "/level");
    const std::string type = read(dir + "/type");
    const std::string size = read(dir + "/size");
    if (level.empty() || size.empty() || type == "Instruction") continue;
    char* end = nullptr;
    const double number = std::strtod(size.c_str(), &end);
    double scale = 1;
    if (*end == 'K') scale = 1024;
    if (*end == 'M') scale = 1024.0 * 1024;
    if (*end == 'G') scale = 1024.0 * 1024 * 1024;
    const int lvl = std::atoi(level.c_str());
    if (!(number > 0) || lvl <= best_level) continue;
    best_level = lvl;
    best_bytes = number * scale;
  }
  if (best_level < 0) {
    return NotFoundError("cache profile: no data or unified cache size under ", sysfs_cpu0_cache);
  }
  return best_bytes;
}

}  // namespace profile
}  // namespace oflite
