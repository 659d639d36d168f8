// ReexecForOpenBlasCore end to end: this test's main calls it first, as
// oflite's does, so on a CPU whose OpenBLAS family OpenBLAS does not know
// (this VM: model 207, OpenBLAS 0.3.21 picks Prescott) the test process is
// exec'd again with OPENBLAS_CORETYPE set, and the checks below run in the
// re-executed process.
#include "tools/oflite/openblas_core.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"

extern "C" char* openblas_get_corename(void);

namespace oflite {
namespace cli {
namespace {

std::string* original_coretype = nullptr;  // OPENBLAS_CORETYPE before main

TEST(OpenBlasCoreTest, AfterTheReexecOpenBlasUsesTheWidestFamilyTheCpuRuns) {
  // Nothing left to prefer: OpenBLAS's family is at least as wide.
  EXPECT_EQ(PreferredOpenBlasCore(), "") << "OpenBLAS core " << openblas_get_corename();
  const char* now = std::getenv("OPENBLAS_CORETYPE");
  if (now != nullptr) {
    EXPECT_EQ(std::string(openblas_get_corename()), now);
  }
}

TEST(OpenBlasCoreTest, AnExplicitCoreTypeIsLeftAlone) {
  if (original_coretype == nullptr) GTEST_SKIP() << "the test was started without OPENBLAS_CORETYPE";
  EXPECT_EQ(std::string(std::getenv("OPENBLAS_CORETYPE")), *original_coretype);
}

}  // namespace
}  // namespace cli
}  // namespace oflite

int main(int argc, char** argv) {
  // Only a value set by whoever started the test (the re-exec marks its own).
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const char* marker = std::getenv("OPENBLAS_CORE_TEST_REEXECUTED");
  if (set != nullptr && marker == nullptr) oflite::cli::original_coretype = new std::string(set);
  if (set == nullptr) setenv("OPENBLAS_CORE_TEST_REEXECUTED", "1", 1);
  oflite::cli::ReexecForOpenBlasCore(argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
