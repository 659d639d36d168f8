#include "oneflow_lite/comm/launch/process_group.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/launch/cpu_binding.h"

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

// RankProcess::cpus: each child is bound before it execs (it reads its own
// affinity), one without CPUs keeps the launcher's.
TEST(ProcessGroupTest, BindsEachChildToItsCpusBeforeItRuns) {
  const std::vector<int> all = AllowedCpus();
  FILE* out = std::tmpfile();
  ProcessGroupOptions options;
  options.output = out;
  RankProcess bound = Shell("grep Cpus_allowed_list /proc/self/status");
  bound.cpus = {all.back()};
  auto result =
      RunProcessGroup({bound, Shell("grep Cpus_allowed_list /proc/self/status")}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->ok) << result->message;
  const std::string text = Capture(out);
  EXPECT_NE(text.find("[rank 0] Cpus_allowed_list:\t" + std::to_string(all.back()) + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[rank 1] Cpus_allowed_list:\t" + DescribeCpus(all) + "\n"),
            std::string::npos)
      << text;
  std::fclose(out);
}

TEST(ProcessGroupTest, RejectsACpuOutOfRangeBeforeStartingAnything) {
  ProcessGroupOptions options;
  options.output = std::tmpfile();
  RankProcess bad = Shell("true");
  bad.cpus = {-1};
  auto result = RunProcessGroup({bad}, options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("CPU -1"), std::string::npos) << result.status();
  std::fclose(options.output);
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

TEST(ProcessGroupTest, TimeoutStopsEveryRankAndSaysSo) {
  FILE* out = std::tmpfile();
  ProcessGroupOptions options;
  options.output = out;
  options.grace = milliseconds(300);
  options.timeout = milliseconds(300);
  auto result = RunProcessGroup({Shell("sleep 60"), Shell("sleep 60")}, options);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(result->failed_rank, -1);
  EXPECT_EQ(result->message, "the job did not finish within the launch timeout");
  EXPECT_TRUE(result->ranks[0].stopped_by_us);
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

// The blame rules with children of chosen exit codes and timings (4 is the
// "a peer failed" code, as in oflite).
ProcessGroupOptions BlameOptions(FILE* out) {
  ProcessGroupOptions options;
  options.output = out;
  options.grace = milliseconds(10000);  // only waited for when a test fails
  options.peer_failed_exit_code = 4;
  return options;
}

// Exit order without timing assumptions: Announce writes the shell's pid to
// a file; AfterReaped waits (bounded, 20 s) until that process is gone,
// i.e. the group has reaped it (a zombie still answers kill -0).
class ExitOrder {
 public:
  ExitOrder() {
    char path[] = "/tmp/process_group_orderXXXXXX";
    const int fd = ::mkstemp(path);
    if (fd >= 0) ::close(fd);
    ::unlink(path);
    path_ = path;
  }
  ~ExitOrder() { ::unlink(path_.c_str()); }
  std::string Announce() const {
    return "echo $$ > " + path_ + ".tmp; mv " + path_ + ".tmp " + path_ + "; ";
  }
  std::string AfterReaped() const {
    return "i=0; while [ $i -lt 1000 ] && { [ ! -s " + path_ + " ] || kill -0 $(cat " + path_ +
           ") 2>/dev/null; }; do sleep 0.02; i=$((i+1)); done; ";
  }

 private:
  std::string path_;
};

TEST(ProcessGroupBlameTest, PeerFailedRankIsNotBlamedWhenAnotherRankFailsLater) {
  FILE* out = std::tmpfile();
  ExitOrder order;
  auto result = RunProcessGroup(
      {Shell(order.Announce() + "echo 'oflite run: rank 1 failed: boom' >&2; exit 4"),
       Shell(order.AfterReaped() + "echo 'progress'; echo 'oflite run: rank 1: kernel matmul: "
             "boom' >&2; echo 'shutting down'; exit 1")},
      BlameOptions(out));
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(result->failed_rank, 1) << result->message;
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_EQ(result->message, "rank 1 exited with code 1");
  EXPECT_EQ(result->cause, "oflite run: rank 1: kernel matmul: boom");
  ASSERT_EQ(result->ranks.size(), 2u);
  EXPECT_EQ(result->ranks[0].exit_code, 4);
  EXPECT_LT(result->ranks[0].exit_order, result->ranks[1].exit_order);
  EXPECT_FALSE(result->ranks[1].stopped_by_us);
  std::fclose(out);
}

TEST(ProcessGroupBlameTest, KilledRankIsBlamedBeforeAnEarlierPeerFailure) {
  FILE* out = std::tmpfile();
  ExitOrder order;
  auto result = RunProcessGroup(
      {Shell(order.Announce() + "echo 'oflite run: lost rank 1' >&2; exit 4"),
       Shell(order.AfterReaped() + "kill -9 $$")},
      BlameOptions(out));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->failed_rank, 1) << result->message;
  EXPECT_EQ(result->message, "rank 1 was killed by signal 9");
  EXPECT_EQ(result->cause, "");
  std::fclose(out);
}

RankOutcome Outcome(int exit_code, int order, bool signaled = false, bool stopped = false) {
  RankOutcome outcome;
  outcome.exit_code = exit_code;
  outcome.exit_order = order;
  outcome.signaled = signaled;
  outcome.stopped_by_us = stopped;
  return outcome;
}

// The order of blame on outcomes that real processes produce only by
// chance (several exits within one reaping pass).
TEST(ProcessGroupBlameTest, BlameOrderSignalThenFailureThenPeerFailureThenStopped) {
  const RankOutcome ok = Outcome(0, 0), peer = Outcome(4, 1), failed = Outcome(1, 2),
                    later_failed = Outcome(3, 3), killed = Outcome(137, 4, true),
                    stopped = Outcome(143, 0, true, true);
  EXPECT_EQ(BlamedRank({ok, ok}, 4), -1);
  EXPECT_EQ(BlamedRank({peer, failed, killed}, 4), 2);
  EXPECT_EQ(BlamedRank({later_failed, peer, failed}, 4), 2);
  EXPECT_EQ(BlamedRank({stopped, peer, ok}, 4), 1);
  EXPECT_EQ(BlamedRank({stopped, ok}, 4), 0);
  EXPECT_EQ(BlamedRank({peer, Outcome(4, 0)}, 4), 1);
  EXPECT_EQ(BlamedRank({peer, failed}, -1), 0);  // no convention: earliest
  RankOutcome lost = Outcome(137, 5, true, true);
  lost.lost_by_peers = true;
  EXPECT_EQ(BlamedRank({peer, lost, Outcome(4, 2)}, 4), 1);
  EXPECT_EQ(BlamedRank({lost, failed}, 4), 1);
  EXPECT_EQ(BlamedRank({stopped, lost}, 4), 1);
}

TEST(ProcessGroupBlameTest, PeerFailedIsBlamedOnlyWhenEveryFailureIsAPeerFailure) {
  FILE* out = std::tmpfile();
  ExitOrder order;
  auto result = RunProcessGroup(
      {Shell(order.AfterReaped() + "exit 4"), Shell(order.Announce() + "exit 4")},
      BlameOptions(out));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->failed_rank, 1) << result->message;
  EXPECT_EQ(result->message, "rank 1 exited with code 4");
  std::fclose(out);
}

// A rank stopped by the group is not the cause, even when it is the only
// other failure and exits with a "real" code after our SIGTERM.
TEST(ProcessGroupBlameTest, RanksStoppedByTheGroupAreNotBlamed) {
  FILE* out = std::tmpfile();
  ProcessGroupOptions options = BlameOptions(out);
  options.grace = milliseconds(300);
  auto result = RunProcessGroup(
      {Shell("trap 'echo stopping >&2; exit 1' TERM; while true; do sleep 0.05; done"),
       Shell("sleep 0.2; exit 4")},
      options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->failed_rank, 1) << result->message;
  EXPECT_TRUE(result->ranks[0].stopped_by_us);
  EXPECT_EQ(result->message, "rank 1 exited with code 4; stopped the others");
  std::fclose(out);
}

// A rank frozen by SIGSTOP (or the OS) never reports; once every other
// rank has exited 4 (each lost a peer: this one), it is killed at once,
// not after the grace periods (10 s here), and blamed first: with 2 and
// with 3 ranks, frozen before or after the others exit.
TEST(ProcessGroupBlameTest, AFrozenRankTheOthersLostIsKilledAtOnceAndBlamed) {
  const std::string freeze = "echo 'oflite run: freezing at train-finish' >&2; kill -STOP $$; ";
  const std::string lost = "echo 'oflite run: lost a peer' >&2; exit 4";
  struct Case {
    std::vector<RankProcess> ranks;
    int frozen;
  };
  const Case cases[] = {
      {{Shell(freeze + "echo never"), Shell("sleep 0.3; " + lost)}, 0},
      {{Shell("sleep 0.2; " + lost), Shell(freeze), Shell("sleep 0.4; " + lost)}, 1},
      {{Shell(lost), Shell("sleep 0.4; " + freeze)}, 1},  // frozen after the peer left
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.ranks.size());
    FILE* out = std::tmpfile();
    const auto start = std::chrono::steady_clock::now();
    auto result = RunProcessGroup(c.ranks, BlameOptions(out));
    ASSERT_TRUE(result.ok());
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
    EXPECT_FALSE(result->ok);
    EXPECT_EQ(result->failed_rank, c.frozen) << result->message;
    EXPECT_EQ(result->exit_code, 128 + SIGKILL);
    EXPECT_EQ(result->message, "rank " + std::to_string(c.frozen) +
                                   " was frozen (stopped by a signal) after every other rank "
                                   "exited with code 4 (a peer failed); killed it");
    EXPECT_EQ(result->cause, "");
    const RankOutcome& frozen = result->ranks[c.frozen];
    EXPECT_TRUE(frozen.frozen && frozen.stopped_by_us && frozen.lost_by_peers);
    for (size_t rank = 0; rank < c.ranks.size(); ++rank) {
      if (static_cast<int>(rank) != c.frozen) {
        EXPECT_EQ(result->ranks[rank].exit_code, 4);
      }
    }
    EXPECT_EQ(Capture(out).find("never"), std::string::npos);
    std::fclose(out);
  }
}

// A frozen rank cannot act on SIGTERM: when another rank fails for its own
// reason, the frozen one gets SIGKILL without waiting out the grace, and
// the failure is blamed.
TEST(ProcessGroupBlameTest, AFrozenRankIsKilledWhenTheGroupStops) {
  FILE* out = std::tmpfile();
  const auto start = std::chrono::steady_clock::now();
  auto result = RunProcessGroup(
      {Shell("kill -STOP $$"), Shell("sleep 0.3; echo 'oflite run: boom' >&2; exit 3")},
      BlameOptions(out));
  ASSERT_TRUE(result.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
  EXPECT_EQ(result->failed_rank, 1) << result->message;
  EXPECT_EQ(result->message, "rank 1 exited with code 3; stopped the others");
  EXPECT_TRUE(result->ranks[0].frozen && result->ranks[0].stopped_by_us);
  EXPECT_FALSE(result->ranks[0].lost_by_peers);
  EXPECT_EQ(result->ranks[0].exit_code, 128 + SIGKILL);
  std::fclose(out);
}

// The only rank left after the others exited 4 that ignores SIGTERM until
// SIGKILL is the one they lost, too (one that ends on SIGTERM is not:
// RanksStoppedByTheGroupAreNotBlamed).
TEST(ProcessGroupBlameTest, AHoldoutThatIgnoresSigtermIsBlamed) {
  FILE* out = std::tmpfile();
  ProcessGroupOptions options = BlameOptions(out);
  options.grace = milliseconds(300);
  auto result = RunProcessGroup({Shell("echo 'oflite run: stuck in a barrier' >&2; trap '' TERM; "
                                       "while true; do sleep 0.05; done"),
                                 Shell("sleep 0.2; exit 4")},
                                options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->failed_rank, 0) << result->message;
  EXPECT_TRUE(result->ranks[0].lost_by_peers);
  EXPECT_FALSE(result->ranks[0].frozen);
  EXPECT_EQ(result->message,
            "rank 0 kept running and ignored SIGTERM after every other rank exited with code 4 "
            "(a peer failed); killed it");
  EXPECT_EQ(result->cause, "");
  std::fclose(out);
}

// An interrupt (as launch's SIGINT/SIGTERM handler sets it) is forwarded to
// every child, including one started in the background by a rank, and a
// child that ignores it is killed after the grace period; nothing survives.
TEST(ProcessGroupInterruptTest, ForwardsTheSignalAndKillsWhatIgnoresIt) {
  FILE* out = std::tmpfile();
  char pid_file[] = "/tmp/process_group_testXXXXXX";
  const int fd = ::mkstemp(pid_file);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::atomic<int> interrupt{0};
  ProcessGroupOptions options;
  options.output = out;
  options.grace = milliseconds(500);
  options.interrupt = &interrupt;
  const std::string pid_path = pid_file, ready_path = std::string(pid_file) + ".ready";
  std::thread interrupter([&interrupt, pid_path, ready_path] {
    // Once rank 0 has started its background child and rank 1 ignores
    // SIGTERM (each writes a number to its file; bounded: 20 s each).
    for (const std::string& path : {pid_path, ready_path}) {
      for (int i = 0; i < 400; ++i) {
        FILE* file = std::fopen(path.c_str(), "r");
        long number = 0;
        const bool written = file != nullptr && std::fscanf(file, "%ld", &number) == 1;
        if (file != nullptr) std::fclose(file);
        if (written) break;
        std::this_thread::sleep_for(milliseconds(50));
      }
    }
    interrupt.store(SIGTERM);
  });
  auto result = RunProcessGroup(
      {Shell(std::string("sleep 60 & echo $! > ") + pid_file + "; wait"),
       Shell("trap '' TERM; echo 1 > " + ready_path + "; sleep 60")},
      options);
  interrupter.join();
  ::unlink(ready_path.c_str());
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(result->interrupted_by, SIGTERM);
  EXPECT_EQ(result->failed_rank, -1);
  EXPECT_NE(result->message.find("interrupted by signal 15"), std::string::npos)
      << result->message;
  EXPECT_TRUE(result->ranks[0].signaled);
  EXPECT_EQ(result->ranks[1].exit_code, 128 + SIGKILL);
  FILE* pids = std::fopen(pid_file, "r");
  ASSERT_NE(pids, nullptr);
  long background = 0;
  ASSERT_EQ(std::fscanf(pids, "%ld", &background), 1);
  std::fclose(pids);
  ::unlink(pid_file);
  // It was signalled with its group; allow a reaper a moment (bounded).
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = ::kill(static_cast<pid_t>(background), 0) != 0;
    if (!gone) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(gone) << "background child " << background << " survived";
  std::fclose(out);
}

// RankProcess::signal_by_stdin (a remote rank behind ssh): an interrupt
// reaches the child as a line naming the signal on its stdin, not as a
// signal, and the child's stdin then ends; a child that fails stops such a
// sibling the same way with TERM. Each child reports what it read and exits
// on its own.
TEST(ProcessGroupInterruptTest, SignalByStdinWritesTheSignalNameAndCloses) {
  FILE* out = std::tmpfile();
  char ready_file[] = "/tmp/process_group_stdinXXXXXX";
  const int fd = ::mkstemp(ready_file);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::atomic<int> interrupt{0};
  ProcessGroupOptions options;
  options.output = out;
  options.grace = milliseconds(20000);
  options.interrupt = &interrupt;
  const std::string ready_path = ready_file;
  std::thread interrupter([&interrupt, ready_path] {
    for (int i = 0; i < 400; ++i) {  // until both children wait on stdin
      FILE* file = std::fopen(ready_path.c_str(), "r");
      int lines = 0;
      for (int c; file != nullptr && (c = std::fgetc(file)) != EOF;) lines += c == '\n';
      if (file != nullptr) std::fclose(file);
      if (lines >= 2) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    interrupt.store(SIGINT);
  });
  // Ignoring INT and TERM: a signal would not end them, only stdin does.
  const std::string reader = "trap '' INT TERM; echo >> " + ready_path +
                             "; read -r line; echo \"read [$line]\"; "
                             "read -r more || echo end; exit 3";
  RankProcess remote0 = Shell(reader), remote1 = Shell(reader);
  remote0.signal_by_stdin = remote1.signal_by_stdin = true;
  auto result = RunProcessGroup({remote0, remote1}, options);
  interrupter.join();
  ::unlink(ready_file);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->interrupted_by, SIGINT);
  const std::string text = Capture(out);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    // Each rank's own lines in order; the two ranks' lines may interleave.
    const size_t read = text.find(prefix + "read [INT]\n");
    const size_t end = text.find(prefix + "end\n");
    EXPECT_NE(read, std::string::npos) << text;
    EXPECT_NE(end, std::string::npos) << text;
    EXPECT_LT(read, end) << text;
    EXPECT_FALSE(result->ranks[rank].signaled) << rank;
    EXPECT_EQ(result->ranks[rank].exit_code, 3) << rank;
  }

  // A failing rank stops a stdin-controlled sibling with TERM.
  ProcessGroupOptions failing;
  failing.output = std::tmpfile();
  failing.grace = milliseconds(20000);
  RankProcess waiter = Shell("read -r line; echo \"read [$line]\"; exit 5");
  waiter.signal_by_stdin = true;
  auto stopped = RunProcessGroup({Shell("sleep 0.2; exit 1"), waiter}, failing);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->failed_rank, 0) << stopped->message;
  EXPECT_TRUE(stopped->ranks[1].stopped_by_us);
  EXPECT_NE(Capture(failing.output).find("[rank 1] read [TERM]\n"), std::string::npos);
  std::fclose(failing.output);
  std::fclose(out);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
