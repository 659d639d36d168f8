#include "oneflow_lite/common/thread_name.h"

#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace oflite {
namespace {

// What `top -H` and `ps -L` read.
std::string CommOfThisThread() {
  std::ifstream comm("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = ThisThreadName();
  std::string seen, comm;
  std::thread([&] {
    NameThisThread("m0/cpu0/s5");
    seen = ThisThreadName();
    comm = CommOfThisThread();
  }).join();
  EXPECT_EQ(seen, "m0/cpu0/s5");
  EXPECT_EQ(comm, "m0/cpu0/s5");
  EXPECT_EQ(ThisThreadName(), before);
}

TEST(ThreadNameTest, KeepsTheFirstFifteenBytesOfALongName) {
  std::string seen;
  std::thread([&] {
    NameThisThread("oflite-collective-worker");
    seen = ThisThreadName();
  }).join();
  EXPECT_EQ(seen, "oflite-collecti");
  EXPECT_EQ(seen.size(), kMaxThreadNameBytes);
}

}  // namespace
}  // namespace oflite
