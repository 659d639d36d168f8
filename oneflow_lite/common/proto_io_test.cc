#include "oneflow_lite/common/proto_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "oneflow_lite/common/testing/fake_env.h"
#include "oneflow_lite/common/version.h"

namespace oflite {
namespace {

std::string TmpPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
}

std::string ReadAll(const std::string& path) {
  return *Env::Default()->ReadFileToString(path, kMaxProtoFileBytes);
}

void WriteRaw(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

Plan SmallPlan() {
  Plan plan;
  plan.mutable_job()->mutable_conf()->set_name("mlp");
  plan.add_machine()->set_machine_id(0);
  plan.set_total_iters(20);
  return plan;
}

TEST(ProtoIoTest, PlanRoundTripIsDeterministic) {
  const std::string a = TmpPath("a.plan.pb"), b = TmpPath("b.plan.pb");
  ASSERT_TRUE(SavePlan(a, SmallPlan()).ok());
  ASSERT_TRUE(SavePlan(b, SmallPlan()).ok());
  EXPECT_EQ(ReadAll(a), ReadAll(b));
  auto plan = LoadPlan(a);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->version(), kPlanVersion);
  EXPECT_EQ(plan->job().conf().name(), "mlp");
}

TEST(ProtoIoTest, MissingEmptyGarbageTruncatedFuture) {
  auto missing = LoadPlan(TmpPath("does-not-exist.pb"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does-not-exist.pb"), std::string::npos);

  WriteRaw(TmpPath("empty.pb"), "");
  EXPECT_EQ(LoadPlan(TmpPath("empty.pb")).status().code(), StatusCode::kDataLoss);

  WriteRaw(TmpPath("garbage.pb"), std::string("\xff\xff\xff\xff garbage \x01\x02", 16));
  EXPECT_EQ(LoadPlan(TmpPath("garbage.pb")).status().code(), StatusCode::kDataLoss);

  const std::string full = TmpPath("full.pb");
  ASSERT_TRUE(SavePlan(full, SmallPlan()).ok());
  std::string bytes = ReadAll(full);
  WriteRaw(TmpPath("trunc.pb"), bytes.substr(0, bytes.size() - 3));
  EXPECT_FALSE(LoadPlan(TmpPath("trunc.pb")).ok());

  Plan future = SmallPlan();
  future.set_version(kPlanVersion + 1);
  ASSERT_TRUE(WriteBinaryProto(TmpPath("future.pb"), future).ok());
  auto f = LoadPlan(TmpPath("future.pb"));
  EXPECT_EQ(f.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(f.status().message().find("newer"), std::string::npos);
}

TEST(ProtoIoTest, OldVersionIsRefusedWithRecompileHint) {
  Plan old = SmallPlan();
  old.set_version(1);  // before run settings and the evaluation plan were fields
  ASSERT_TRUE(WriteBinaryProto(TmpPath("old.pb"), old).ok());
  auto loaded = LoadPlan(TmpPath("old.pb"));
  EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("old.pb"), std::string::npos) << loaded.status();
  EXPECT_NE(loaded.status().message().find("version 1"), std::string::npos) << loaded.status();
  EXPECT_NE(loaded.status().message().find("recompile it with `oflite compile`"), std::string::npos)
      << loaded.status();
}

TEST(ProtoIoTest, TextProtoErrorsNameLine) {
  const std::string p = TmpPath("cluster.pbtxt");
  WriteRaw(p, "machine { id: 0 address: \"127.0.0.1\" }\nmachine { id: oops }\n");
  ClusterProto cluster;
  Status s = ReadTextProto(p, &cluster);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s;
  EXPECT_NE(s.message().find("cluster.pbtxt"), std::string::npos);
}

TEST(ProtoIoTest, AtomicWriteLeavesNoTemporary) {
  const std::string p = TmpPath("atomic.txt");
  ASSERT_TRUE(Env::Default()->WriteFileAtomically(p, "hello").ok());
  EXPECT_EQ(ReadAll(p), "hello");
  EXPECT_FALSE(Env::Default()->WriteFileAtomically(TmpPath("no/such/dir/x"), "y").ok());
}

// What is not a plan is refused before it is read into memory: a device
// that never ends (it used to grow to gigabytes and die of bad_alloc), a
// file larger than protobuf parses, a directory; each error names the file.
TEST(ProtoIoTest, DevicesAndHugeFilesAreRefusedAtOnce) {
  const auto begin = std::chrono::steady_clock::now();
  auto zero = LoadPlan("/dev/zero");
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument) << zero.status();
  EXPECT_NE(zero.status().message().find("'/dev/zero' is not a regular file"), std::string::npos)
      << zero.status();

  const std::string huge = TmpPath("huge.pb");  // sparse: takes no disk space
  std::remove(huge.c_str());
  WriteRaw(huge, "");
  ASSERT_EQ(::truncate(huge.c_str(), int64_t{3} << 30), 0);
  auto big = LoadPlan(huge);
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange) << big.status();
  EXPECT_NE(big.status().message().find(huge), std::string::npos) << big.status();
  EXPECT_NE(big.status().message().find("2147483647 bytes"), std::string::npos) << big.status();
  std::remove(huge.c_str());

  ClusterProto cluster;
  Status dir = ReadTextProto(TmpPath(""), &cluster);
  EXPECT_EQ(dir.code(), StatusCode::kInvalidArgument) << dir;
  EXPECT_NE(dir.message().find("directory"), std::string::npos) << dir;
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
}

TEST(ProtoIoTest, SavingIntoAMissingDirectoryNamesIt) {
  Status saved = SavePlan(TmpPath("missing-dir/x.plan.pb"), SmallPlan());
  EXPECT_EQ(saved.code(), StatusCode::kInvalidArgument) << saved;
  EXPECT_NE(saved.message().find("directory '" + TmpPath("missing-dir") + "' does not exist"),
            std::string::npos)
      << saved;
}

// Plans are written through the Env given: a failure at any point of the
// atomic write leaves the previous plan loadable.
TEST(ProtoIoTest, AFailedSaveKeepsThePreviousPlan) {
  const std::string path = TmpPath("kept.plan.pb");
  ASSERT_TRUE(SavePlan(path, SmallPlan()).ok());
  for (FileOp op : {FileOp::kAppend, FileOp::kSync, FileOp::kRename}) {
    FakeEnv env;
    env.FailNth(op, 1);
    Plan other = SmallPlan();
    other.set_total_iters(99);
    EXPECT_FALSE(SavePlan(path, other, &env).ok()) << FileOpName(op);
    auto loaded = LoadPlan(path, &env);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->total_iters(), 20) << FileOpName(op);
  }
}

}  // namespace
}  // namespace oflite
