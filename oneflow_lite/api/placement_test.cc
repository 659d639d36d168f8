#include "oneflow_lite/api/placement.h"

#include <gtest/gtest.h>

namespace oflite {
namespace {

std::vector<int64_t> Ids(const google::protobuf::RepeatedField<int64_t>& ids) {
  return std::vector<int64_t>(ids.begin(), ids.end());
}

TEST(PlacementTest, DefaultIsOneCpu) {
  Placement p;
  EXPECT_EQ(p.ToString(), "0:cpu:0");
  EXPECT_EQ(p.parallel_num(), 1);
}

TEST(PlacementTest, ParsesSingleMachineRange) {
  StatusOr<Placement> p = Placement::Parse("0:cpu:0-1");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device_type(), DEVICE_CPU);
  EXPECT_EQ(Ids(p->proto().machine_id()), (std::vector<int64_t>{0}));
  EXPECT_EQ(Ids(p->proto().device_id()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p->parallel_num(), 2);
  EXPECT_EQ(p->ToString(), "0:cpu:0-1");
}

TEST(PlacementTest, ParsesMachineRangesAndLists) {
  StatusOr<Placement> p = Placement::Parse("0-1:cuda:0-3");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device_type(), DEVICE_CUDA);
  EXPECT_EQ(Ids(p->proto().machine_id()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Ids(p->proto().device_id()), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(p->parallel_num(), 8);

  StatusOr<Placement> q = Placement::Parse("2,0:gpu:3,1");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(Ids(q->proto().machine_id()), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(Ids(q->proto().device_id()), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(q->ToString(), "0,2:cuda:1,3");

  StatusOr<Placement> r = Placement::Parse("0-2,5:cpu:0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToString(), "0-2,5:cpu:0");
}

TEST(PlacementTest, HierarchyMustMatchDeviceCount) {
  StatusOr<Placement> p = Placement::Parse("0-1:cuda:0-3", Shape{2, 4});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Shape(p->proto().hierarchy()), (Shape{2, 4}));
  EXPECT_EQ(p->ToString(), "0-1:cuda:0-3@2x4");

  StatusOr<Placement> bad = Placement::Parse("0-1:cuda:0-3", Shape{3, 4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hierarchy has 12 devices, the placement has 8"),
            std::string::npos)
      << bad.status();
}

void ExpectError(const std::string& text, const std::string& fragment) {
  StatusOr<Placement> p = Placement::Parse(text);
  ASSERT_FALSE(p.ok()) << text << " parsed as " << p->ToString();
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find(fragment), std::string::npos)
      << "'" << text << "': " << p.status();
  EXPECT_NE(p.status().message().find("'" + text + "'"), std::string::npos) << p.status();
}

TEST(PlacementTest, RejectsMalformedText) {
  ExpectError("", "want <machines>:<device type>:<device ids>");
  ExpectError("0:cpu", "want <machines>:<device type>:<device ids>");
  ExpectError("0:cpu:0:1", "want <machines>:<device type>:<device ids>");
  ExpectError("0:tpu:0", "unknown device type 'tpu'");
  ExpectError(":cpu:0", "empty machine list");
  ExpectError("0:cpu:", "empty device list");
  ExpectError("0:cpu:3-1", "reversed device range '3-1'");
  ExpectError("0,0:cpu:0", "machine id 0 listed twice");
  ExpectError("0:cpu:0-2,1", "device id 1 listed twice");
  ExpectError("a:cpu:0", "bad machine id 'a'");
  ExpectError("0:cpu:-1", "bad device id ''");
  ExpectError("0:cpu:0,", "bad device id ''");
}

TEST(PlacementTest, FromProtoValidates) {
  PlacementProto proto;
  proto.set_device_type(DEVICE_CPU);
  proto.add_machine_id(1);
  proto.add_machine_id(0);
  proto.add_device_id(0);
  StatusOr<Placement> p = Placement::FromProto(proto);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("ascending and unique"), std::string::npos) << p.status();

  PlacementProto no_type;
  no_type.add_machine_id(0);
  no_type.add_device_id(0);
  EXPECT_FALSE(Placement::FromProto(no_type).ok());
}

TEST(PlacementTest, EqualityIsByValue) {
  EXPECT_EQ(*Placement::Parse("0:cpu:0-1"), *Placement::Parse("0:cpu:1,0"));
  EXPECT_NE(*Placement::Parse("0:cpu:0-1"), *Placement::Parse("0:cuda:0-1"));
}

}  // namespace
}  // namespace oflite
