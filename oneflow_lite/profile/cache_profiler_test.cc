#include "oneflow_lite/profile/cache_profiler.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace oflite {
namespace profile {
namespace {

// Eviction writes dirty lines back: the data survives, whatever the
// range's alignment, and an empty range is nothing.
TEST(CacheProfilerTest, EvictionKeepsTheData) {
  std::vector<uint8_t> bytes(1 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  EvictFromCaches(bytes.data() + 5, bytes.size() - 9);
  EvictFromCaches(bytes.data(), 0);
  EvictFromCaches(nullptr, 100);
  for (size_t i = 0; i < bytes.size(); ++i) {
    ASSERT_EQ(bytes[i], static_cast<uint8_t>(i * 7 + 3)) << "byte " << i;
  }
}

TEST(CacheProfilerTest, BadOptionsAreRefused) {
  CacheProfileOptions options;
  options.min_bytes = 1024;
  EXPECT_EQ(ProfileCacheBytes(options).status().code(), StatusCode::kInvalidArgument);
  options = CacheProfileOptions{};
  options.max_bytes = options.min_bytes / 2;
  EXPECT_EQ(ProfileCacheBytes(options).status().code(), StatusCode::kInvalidArgument);
  options = CacheProfileOptions{};
  options.passes = 0;
  EXPECT_EQ(ProfileCacheBytes(options).status().code(), StatusCode::kInvalidArgument);
}

// The figure is one of the tried sets or between two of them, each set
// has its cost, and a byte from memory costs more than one in cache (else
// the probe says it cannot tell).
TEST(CacheProfilerTest, TheFigureLiesAmongTheTriedSets) {
  if (!CanEvictFromCaches()) GTEST_SKIP() << "no cache-flush instruction in this build";
  CacheProfileOptions options;
  options.min_bytes = int64_t{1} << 20;
  options.max_bytes = int64_t{64} << 20;
  options.passes = 3;
  StatusOr<CacheProfile> profile = ProfileCacheBytes(options);
  if (!profile.ok()) {
    ASSERT_EQ(profile.status().code(), StatusCode::kUnavailable) << profile.status();
    EXPECT_NE(profile.status().message().find("costs about what one in cache does"),
              std::string::npos)
        << profile.status();
    return;
  }
  ASSERT_EQ(profile->ns_per_byte.size(), 7u) << "1, 2, 4, ..., 64 MiB";
  EXPECT_EQ(profile->ns_per_byte.front().first, options.min_bytes);
  EXPECT_EQ(profile->ns_per_byte.back().first, options.max_bytes);
  for (const auto& set : profile->ns_per_byte) EXPECT_GT(set.second, 0) << set.first;
  EXPECT_GT(profile->cold_ns_per_byte, profile->ns_per_byte.front().second * 1.1);
  EXPECT_GE(profile->cache_bytes, static_cast<double>(options.min_bytes));
  EXPECT_LE(profile->cache_bytes, static_cast<double>(options.max_bytes));
}

// A cpu0 cache folder as the kernel lists it: index<i>/{level,type,size}.
std::string FakeCacheDir(const std::string& name,
                         const std::vector<std::vector<std::string>>& caches) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  for (size_t i = 0; i < caches.size(); ++i) {
    const std::string index = dir + "/index" + std::to_string(i);
    ::mkdir(index.c_str(), 0755);
    std::ofstream(index + "/level") << caches[i][0] << "\n";
    std::ofstream(index + "/type") << caches[i][1] << "\n";
    std::ofstream(index + "/size") << caches[i][2] << "\n";
  }
  return dir;
}

// The largest level's data or unified cache, its size's unit applied; an
// instruction cache never counts; no listing is NotFound.
TEST(CacheProfilerTest, LastLevelCacheBytesReadsTheLargestLevel) {
  const std::string zen = FakeCacheDir("zen", {{"1", "Data", "32K"},
                                               {"1", "Instruction", "32K"},
                                               {"2", "Unified", "1024K"},
                                               {"3", "Unified", "32768K"}});
  StatusOr<double> bytes = LastLevelCacheBytes(zen);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 32.0 * 1024 * 1024);
  const std::string two = FakeCacheDir("two", {{"2", "Unified", "2M"}, {"1", "Data", "48K"},
                                               {"4", "Instruction", "64M"}});
  bytes = LastLevelCacheBytes(two);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 2.0 * 1024 * 1024);
  EXPECT_EQ(LastLevelCacheBytes(FakeCacheDir("none", {})).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LastLevelCacheBytes("/nonexistent/cache").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace profile
}  // namespace oflite
