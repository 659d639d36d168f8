// The counter-based generator: pinned values, bounds, and the portable
// log/cosine against libm.
#include "oneflow_lite/data/counter_rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace oflite {
namespace {

TEST(CounterRngTest, PinnedValues) {
  // Changing any of these changes every model's initial weights and every
  // shuffling order: a deliberate, visible decision.
  EXPECT_EQ(MixBits(0), 0xE220A8397B1DCDAFULL);  // SplitMix64, state 0
  EXPECT_EQ(StableHash(""), 0xCBF29CE484222325ULL);
  EXPECT_EQ(StableHash("a"), 0xAF63DC4C8601EC8CULL);  // FNV-1a test vector
  EXPECT_EQ(UniformFromBits(0), 0.0);
  EXPECT_EQ(UniformFromBits(UINT64_MAX), 1.0 - std::ldexp(1.0, -53));
  EXPECT_EQ(OpenUniformFromBits(0), std::ldexp(1.0, -53));
  EXPECT_EQ(OpenUniformFromBits(UINT64_MAX), 1.0);
  EXPECT_NE(CounterBits(1, 0), CounterBits(1, 1));
  EXPECT_NE(CounterBits(1, 0), CounterBits(2, 0));
}

TEST(CounterRngTest, PinnedNormalValues) {
  // Same role as above for Box-Muller through PortableLog/PortableCosTurns;
  // computed once on x86-64 (and identical with -march=native, FMA present).
  EXPECT_EQ(NormalFromBits(CounterBits(1, 0), CounterBits(1, 1)), -0x1.39148fb3b6a6p+0);
  EXPECT_EQ(NormalFromBits(CounterBits(7, 10), CounterBits(7, 11)), 0x1.1ebaed4dc9207p+1);
  EXPECT_EQ(UniformFromBits(CounterBits(11, 0)), 0x1.14650534d410ep-2);
}

TEST(CounterRngTest, NextBelowStaysInRangeAndCoversIt) {
  CounterRng rng(9);
  int counts[7] = {0};
  for (int i = 0; i < 7000; ++i) {
    const uint64_t value = rng.NextBelow(7);
    ASSERT_LT(value, 7u);
    ++counts[value];
  }
  for (int count : counts) EXPECT_NEAR(count, 1000, 150);
  CounterRng one(3);
  EXPECT_EQ(one.NextBelow(1), 0u);
}

// The batched draw (vectorized where the CPU has AVX2) gives the bits of the
// one-at-a-time calls: every length around the 8-value step, counters that
// wrap past 2^64, and the stream continues where the batch ended.
TEST(CounterRngTest, NextUniformsEqualsNextUniformCalls) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{0x9E3779B97F4A7C15ULL}, UINT64_MAX}) {
    for (uint64_t first : {uint64_t{0}, uint64_t{5}, UINT64_MAX - 12}) {
      for (int64_t n : {0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 784, 1027}) {
        CounterRng batched(seed, first);
        CounterRng single(seed, first);
        std::vector<double> values(static_cast<size_t>(n) + 1, -1.0);
        batched.NextUniforms(n, values.data());
        for (int64_t i = 0; i < n; ++i) {
          const double expected = single.NextUniform();
          ASSERT_EQ(values[static_cast<size_t>(i)], expected)
              << "seed " << seed << " first " << first << " n " << n << " i " << i;
        }
        EXPECT_EQ(values[static_cast<size_t>(n)], -1.0) << "wrote past n = " << n;
        EXPECT_EQ(batched.Next(), single.Next()) << "seed " << seed << " n " << n;
      }
    }
  }
}

TEST(PortableMathTest, LogMatchesLibm) {
  EXPECT_EQ(PortableLog(1.0), 0.0);
  for (double x :
       {std::ldexp(1.0, -53), 1e-300, 0.1, 0.5, 0.7071, 0.70711, 0.999999, 2.0, 10.0, 1e300}) {
    EXPECT_NEAR(PortableLog(x), std::log(x), 4e-16 * std::fabs(std::log(x)) + 2.5e-16) << x;
  }
  CounterRng rng(5);
  for (int i = 0; i < 20000; ++i) {
    const double x = OpenUniformFromBits(rng.Next());
    ASSERT_NEAR(PortableLog(x), std::log(x), 4e-16 * std::fabs(std::log(x)) + 2.5e-16) << x;
  }
}

TEST(PortableMathTest, CosTurnsMatchesLibm) {
  EXPECT_EQ(PortableCosTurns(0.0), 1.0);
  EXPECT_EQ(PortableCosTurns(0.5), -1.0);
  EXPECT_NEAR(PortableCosTurns(0.25), 0.0, 1e-16);
  EXPECT_NEAR(PortableCosTurns(1.0 / 8), std::sqrt(0.5), 2e-16);
  EXPECT_NEAR(PortableCosTurns(-3.75), 0.0, 1e-16);
  CounterRng rng(6);
  for (int i = 0; i < 20000; ++i) {
    const double t = UniformFromBits(rng.Next());
    ASSERT_NEAR(PortableCosTurns(t), std::cos(6.283185307179586 * t), 2e-15) << t;
  }
}

TEST(PortableMathTest, NormalMoments) {
  double sum = 0, sum_sq = 0, sum_4 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = NormalFromBits(CounterBits(11, 2 * i), CounterBits(11, 2 * i + 1));
    sum += z;
    sum_sq += z * z;
    sum_4 += z * z * z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.01);
  EXPECT_NEAR(sum_4 / n, 3.0, 0.06);  // kurtosis of a normal
}

}  // namespace
}  // namespace oflite
