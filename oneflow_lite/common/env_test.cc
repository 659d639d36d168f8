// Env::Default() on real files, and the composite operations (read with a
// limit, atomic write, mkdir -p) under the fake's injected failures.
#include "oneflow_lite/common/env.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "oneflow_lite/common/testing/fake_env.h"

namespace oflite {
namespace {

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root != nullptr ? root : "/tmp") + "/env_" + name;
  EXPECT_TRUE(Env::Default()->CreateDirectories(dir).ok());
  return dir;
}

void WriteRaw(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

void ExpectError(const Status& status, StatusCode code, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos) << fragment << " in " << status;
  }
}

std::vector<std::string> SortedChildren(Env* env, const std::string& dir) {
  StatusOr<std::vector<std::string>> names = env->GetChildren(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return {};
  std::sort(names->begin(), names->end());
  return *names;
}

TEST(EnvTest, ReadFileToStringUpToTheLimit) {
  Env* env = Env::Default();
  const std::string path = TempDir("read") + "/seven";
  WriteRaw(path, "1234567");
  StatusOr<std::string> read = env->ReadFileToString(path, 7);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "1234567");
  ExpectError(env->ReadFileToString(path, 6).status(), StatusCode::kOutOfRange,
              {"'" + path + "'", "larger than 6 bytes"});
  WriteRaw(path, "");
  read = env->ReadFileToString(path, 0);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
  ExpectError(env->ReadFileToString(path + ".missing", 10).status(), StatusCode::kNotFound,
              {path + ".missing"});
}

TEST(EnvTest, ReadRefusesWhatIsNotARegularFileAtOnce) {
  Env* env = Env::Default();
  const std::string dir = TempDir("irregular");
  ExpectError(env->ReadFileToString(dir, 1 << 20).status(), StatusCode::kInvalidArgument,
              {"'" + dir + "'", "not a regular file", "directory"});
  const auto begin = std::chrono::steady_clock::now();
  ExpectError(env->ReadFileToString("/dev/zero", int64_t{1} << 40).status(),
              StatusCode::kInvalidArgument, {"'/dev/zero'", "not a regular file", "device"});
  // A FIFO without a writer: opening must not wait for one.
  const std::string fifo = dir + "/fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  ExpectError(env->ReadFileToString(fifo, 100).status(), StatusCode::kInvalidArgument,
              {"'" + fifo + "'", "FIFO"});
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
}

// A file that says it is empty when opened and then never ends (a file
// still being written, /proc): the reader stops at the limit anyway.
class EndlessFileEnv : public EnvWrapper {
 public:
  EndlessFileEnv() : EnvWrapper(Env::Default()) {}
  StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    class Endless : public SequentialFile {
     public:
      StatusOr<size_t> Read(char* buffer, size_t size) override {
        std::memset(buffer, 'x', size);
        read_ += size;
        return size;
      }
      uint64_t SizeHint() const override { return 0; }
      uint64_t read_ = 0;
    };
    return std::unique_ptr<SequentialFile>(new Endless);
  }
};

TEST(EnvTest, ReadNeverTrustsTheSizeAlone) {
  EndlessFileEnv env;
  ExpectError(env.ReadFileToString("endless", 3 << 20).status(), StatusCode::kOutOfRange,
              {"'endless'", "larger than 3145728 bytes"});
}

TEST(EnvTest, WriteFileAtomicallyReplacesAndLeavesNoTemporary) {
  Env* env = Env::Default();
  const std::string dir = TempDir("atomic");
  const std::string path = dir + "/file";
  ASSERT_TRUE(env->WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(env->WriteFileAtomically(path, {"sec", "", "ond"}).ok());
  EXPECT_EQ(*env->ReadFileToString(path, 100), "second");
  EXPECT_EQ(SortedChildren(env, dir), std::vector<std::string>{"file"});
  // A bare name goes to the current directory's rule: its parent is ".".
  EXPECT_TRUE(env->CheckParentDirectory("bare-name").ok());
}

TEST(EnvTest, MissingParentDirectoryIsInvalidArgumentNamingIt) {
  Env* env = Env::Default();
  const std::string dir = TempDir("parent");
  ExpectError(env->WriteFileAtomically(dir + "/no/such/x", "y"), StatusCode::kInvalidArgument,
              {"directory '" + dir + "/no/such' does not exist", dir + "/no/such/x"});
  WriteRaw(dir + "/plain", "p");
  ExpectError(env->WriteFileAtomically(dir + "/plain/x", "y"), StatusCode::kInvalidArgument,
              {"'" + dir + "/plain' is not a directory"});
  EXPECT_FALSE(env->FileExists(dir + "/no"));
}

TEST(EnvTest, CreateDirectoriesMakesParentsAndRefusesAFile) {
  Env* env = Env::Default();
  const std::string dir = TempDir("mkdirs");
  ASSERT_TRUE(env->CreateDirectories(dir + "/a/b//c/").ok());
  EXPECT_TRUE(env->IsDirectory(dir + "/a/b/c"));
  ASSERT_TRUE(env->CreateDirectories(dir + "/a/b/c").ok());  // already there
  WriteRaw(dir + "/file", "f");
  ExpectError(env->CreateDirectories(dir + "/file/d"), StatusCode::kFailedPrecondition,
              {"'" + dir + "/file' exists and is not a directory"});
}

TEST(EnvTest, ParentDirectory) {
  EXPECT_EQ(ParentDirectory("x.plan.pb"), ".");
  EXPECT_EQ(ParentDirectory("out/x.plan.pb"), "out");
  EXPECT_EQ(ParentDirectory("a/b//x"), "a/b");
  EXPECT_EQ(ParentDirectory("/x"), "/");
  EXPECT_EQ(ParentDirectory("/a/x"), "/a");
}

// Each write primitive failing once leaves the old file whole and no
// temporary behind, and names the file.
TEST(FakeEnvTest, AFailedAtomicWriteKeepsTheOldFile) {
  for (FileOp op :
       {FileOp::kCreate, FileOp::kAppend, FileOp::kSync, FileOp::kClose, FileOp::kRename}) {
    SCOPED_TRACE(FileOpName(op));
    FakeEnv env;
    const std::string dir = TempDir(std::string("fail_") + std::to_string(static_cast<int>(op)));
    const std::string path = dir + "/file";
    ASSERT_TRUE(env.WriteFileAtomically(path, "old").ok());
    env.FailNth(op, 1);
    ExpectError(env.WriteFileAtomically(path, {"new", "er"}), StatusCode::kUnavailable,
                {"injected failure", path});
    EXPECT_EQ(*env.ReadFileToString(path, 100), "old");
    EXPECT_EQ(SortedChildren(&env, dir), std::vector<std::string>{"file"});
    ASSERT_TRUE(env.WriteFileAtomically(path, "new").ok());  // the fault fired once
    EXPECT_EQ(*env.ReadFileToString(path, 100), "new");
  }
}

TEST(FakeEnvTest, FailNthCountsFromNow) {
  FakeEnv env;
  const std::string dir = TempDir("nth");
  ASSERT_TRUE(env.WriteFileAtomically(dir + "/a", "a").ok());
  const int appends = env.Count(FileOp::kAppend);
  EXPECT_EQ(appends, 1);
  env.FailNth(FileOp::kAppend, 2);  // the second piece of the next write
  ExpectError(env.WriteFileAtomically(dir + "/b", {"one", "two"}), StatusCode::kUnavailable,
              {"append"});
  EXPECT_EQ(env.Count(FileOp::kAppend), appends + 2);
  EXPECT_FALSE(env.FileExists(dir + "/b"));
}

// A crash between the write and the rename: the old file stays, the synced
// temporary is left as a dead process would leave it, and nothing written
// after the crash reaches the disk until the "restart".
TEST(FakeEnvTest, CrashBetweenWriteAndRename) {
  FakeEnv env;
  const std::string dir = TempDir("crash");
  const std::string path = dir + "/file";
  ASSERT_TRUE(env.WriteFileAtomically(path, "old").ok());
  env.CrashAtNth(FileOp::kRename, 1);
  ExpectError(env.WriteFileAtomically(path, "new"), StatusCode::kAborted,
              {"simulated crash at rename"});
  EXPECT_TRUE(env.crashed());
  EXPECT_EQ(*env.ReadFileToString(path, 100), "old");
  const std::vector<std::string> left = SortedChildren(&env, dir);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0], "file");
  EXPECT_EQ(left[1].rfind("file.tmp.", 0), 0u) << left[1];
  ExpectError(env.WriteFileAtomically(dir + "/other", "x"), StatusCode::kAborted,
              {"after the crash"});
  EXPECT_FALSE(env.FileExists(dir + "/other"));
  env.ClearFaults();
  ASSERT_TRUE(env.WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*env.ReadFileToString(path, 100), "new");
}

TEST(FakeEnvTest, ManualClock) {
  FakeEnv env;
  const int64_t start = env.NowMicros();
  EXPECT_EQ(env.NowMicros(), start);
  const auto wall = std::chrono::steady_clock::now();
  env.SleepForMicroseconds(int64_t{3600} * 1000 * 1000);  // an hour, at once
  EXPECT_LT(std::chrono::steady_clock::now() - wall, std::chrono::seconds(1));
  EXPECT_EQ(env.NowMicros(), start + int64_t{3600} * 1000 * 1000);
  env.AdvanceMicros(5);
  EXPECT_EQ(env.NowMicros(), start + int64_t{3600} * 1000 * 1000 + 5);
}

TEST(EnvTest, RealClockMoves) {
  Env* env = Env::Default();
  const int64_t before = env->NowMicros();
  env->SleepForMicroseconds(2000);
  EXPECT_GE(env->NowMicros() - before, 2000);
}

}  // namespace
}  // namespace oflite
