#include "oneflow_lite/comm/launch/process_group.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace oflite {
namespace comm {
namespace {

using std::chrono::milliseconds;

RankProcess Shell(const std::string& script) { return {{"/bin/sh", "-c", script}, {}}; }

std::string Capture(FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  return text;
}

TEST(ProcessGroupTest, PrefixesEveryLineWithItsRankAndSucceeds) {
  FILE* out = std::tmpfile();
  ProcessGroupOptions options;
  options.output = out;
  auto result = RunProcessGroup(
      {Shell("echo hello; echo oops >&2"), Shell("printf 'a\\nno newline'"),
       {{"/bin/sh", "-c", "echo $RANK"}, {"RANK=2"}}},
      options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->ok) << result->message;
  std::string text = Capture(out);
  EXPECT_NE(text.find("[rank 0] hello\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 0] oops\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 1] a\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 1] no newline\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 2] 2\n"), std::string::npos) << text;
  std::fclose(out);
}

TEST(ProcessGroupTest, OneFailureStopsTheOthersAndNamesTheRank) {
  FILE* out = std::tmpfile();
  ProcessGroupOptions options;
  options.output = out;
  options.grace = milliseconds(2000);
  const auto start = std::chrono::steady_clock::now();
  auto result = RunProcessGroup(
      {Shell("sleep 60"), Shell("sleep 0.2; echo failing; exit 3"),
       Shell("trap '' TERM; sleep 60")},  // ignores SIGTERM: needs SIGKILL
      options);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(result->failed_rank, 1);
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->message, "rank 1 exited with code 3; stopped the others");
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(15000));
  EXPECT_NE(Capture(out).find("[rank 1] failing"), std::string::npos);
  std::fclose(out);
}

TEST(ProcessGroupTest, KilledRankIsReportedWithItsSignal) {
  FILE* out = std::tmpfile();
  ProcessGroupOptions options;
  options.output = out;
  auto result = RunProcessGroup({Shell("kill -9 $$"), Shell("sleep 60")}, options);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(result->failed_rank, 0);
  EXPECT_EQ(result->message, "rank 0 was killed by signal 9; stopped the others");
  std::fclose(out);
}

TEST(ProcessGroupTest, MissingProgramFailsThatRank) {
  FILE* out = std::tmpfile();
  ProcessGroupOptions options;
  options.output = out;
  auto result = RunProcessGroup({{{"/nonexistent/oflite"}, {}}}, options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 127);
  EXPECT_NE(Capture(out).find("[rank 0] cannot start /nonexistent/oflite"), std::string::npos);
  std::fclose(out);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
