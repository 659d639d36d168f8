#include "oneflow_lite/common/proto_io.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "oneflow_lite/common/version.h"

namespace oflite {
namespace {

std::string TmpPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
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
  EXPECT_EQ(*ReadFileToString(a), *ReadFileToString(b));
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
  std::string bytes = *ReadFileToString(full);
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
  EXPECT_NE(loaded.status().message().find("recompile it with `oflite compile`"),
            std::string::npos)
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
  ASSERT_TRUE(WriteFileAtomically(p, "hello").ok());
  EXPECT_EQ(*ReadFileToString(p), "hello");
  EXPECT_FALSE(WriteFileAtomically(TmpPath("no/such/dir/x"), "y").ok());
}

}  // namespace
}  // namespace oflite
