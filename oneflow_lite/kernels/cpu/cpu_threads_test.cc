#include "oneflow_lite/kernels/cpu/cpu_threads.h"

#include "gtest/gtest.h"

namespace oflite {
namespace {

TEST(CpuThreadsTest, ZeroDividesTheCoresAmongTheDevices) {
  EXPECT_EQ(*ResolveCpuThreads(0, 1, 8, "x"), 8);
  EXPECT_EQ(*ResolveCpuThreads(0, 2, 8, "x"), 4);
  EXPECT_EQ(*ResolveCpuThreads(0, 3, 8, "x"), 2);
  EXPECT_EQ(*ResolveCpuThreads(0, 0, 2, "x"), 2);   // host threads only: one device's worth
  EXPECT_EQ(*ResolveCpuThreads(0, 4, 2, "x"), 1);   // more devices than cores: at least 1
}

TEST(CpuThreadsTest, AnExplicitCountWins) {
  EXPECT_EQ(*ResolveCpuThreads(3, 2, 2, "x"), 3);
  EXPECT_EQ(*ResolveCpuThreads(1, 1, 64, "x"), 1);
}

TEST(CpuThreadsTest, OutOfRangeNamesTheSource) {
  StatusOr<int> negative = ResolveCpuThreads(-1, 1, 2, "--cpu-threads");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("--cpu-threads -1"), std::string::npos)
      << negative.status().ToString();
  EXPECT_FALSE(ResolveCpuThreads(kMaxCpuThreads + 1, 1, 2, "x").ok());
}

TEST(CpuThreadsTest, SetReachesTheBlasLibrary) {
  EXPECT_GE(AvailableCpuCores(), 1);
  SetCpuComputeThreads(1);
  EXPECT_EQ(CpuComputeThreads(), 1);
  SetCpuComputeThreads(3);
  EXPECT_EQ(CpuComputeThreads(), 3);
  SetCpuComputeThreads(0);  // clamped to 1
  EXPECT_EQ(CpuComputeThreads(), 1);
  EXPECT_NE(CpuComputeDescription().find("1 BLAS thread"), std::string::npos)
      << CpuComputeDescription();
}

TEST(CpuThreadsTest, TheSettingIsRecordedForTheOneDnnKernels) {
  SetCpuComputeThreads(2);
  EXPECT_EQ(CpuComputeThreadsSetting(), 2);
  SetCpuComputeThreads(0);  // clamped to 1, like the BLAS count
  EXPECT_EQ(CpuComputeThreadsSetting(), 1);
}

TEST(CpuThreadsTest, PreferredOpenBlasCoreIsEmptyOrAFamilyName) {
  const std::string core = PreferredOpenBlasCore();
  EXPECT_TRUE(core.empty() || core == "SkylakeX" || core == "Haswell") << core;
}

}  // namespace
}  // namespace oflite
