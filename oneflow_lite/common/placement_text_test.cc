#include "oneflow_lite/common/placement_text.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace oflite {
namespace {

TEST(PlacementTextTest, ParsesListsRangesAndHierarchy) {
  StatusOr<PlacementProto> p = ParsePlacementText("0-1:cuda:0-3@2x4");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device_type(), DEVICE_CUDA);
  EXPECT_EQ(p->machine_id_size(), 2);
  EXPECT_EQ(p->device_id_size(), 4);
  ASSERT_EQ(p->hierarchy().dim_size(), 2);
  EXPECT_EQ(p->hierarchy().dim(0), 2);
  EXPECT_EQ(p->hierarchy().dim(1), 4);
  EXPECT_EQ(PlacementToString(*p), "0-1:cuda:0-3@2x4");

  StatusOr<PlacementProto> q = ParsePlacementText("5,0-2:gpu:3,1");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(PlacementToString(*q), "0-2,5:cuda:1,3");
  EXPECT_EQ(PlacementToString(*ParsePlacementText("0:cpu:0")), "0:cpu:0");
}

TEST(PlacementTextTest, RoundTripsCanonicalText) {
  for (const char* text : {"0:cpu:0", "0-3:cpu:0-1", "0,2:cuda:1,3", "0-1:cpu:0-1@2x2",
                           "7:cuda:0@1"}) {
    StatusOr<PlacementProto> p = ParsePlacementText(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status();
    EXPECT_EQ(PlacementToString(*p), text);
  }
}

TEST(PlacementTextTest, ErrorsQuoteTheTextAndSayWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "want <machines>:<device type>:<device ids>"},
      {"0:cpu", "want <machines>:<device type>:<device ids>"},
      {"0:tpu:0", "unknown device type 'tpu'"},
      {"1-0:cpu:0", "reversed machine range '1-0'"},
      {"0:cpu:x", "bad device id 'x'"},
      {"0,0:cpu:0", "machine id 0 listed twice"},
      {"0:cpu:", "empty device list"},
      {"0-99999:cpu:0", "is too large"},
      {"0:cpu:0@", "empty hierarchy after '@'"},
      {"0-1:cpu:0@3", "hierarchy has 3 devices, the placement has 2"},
      {"0-1:cpu:0@2x0", "non-positive dimension"},
      {"0:cpu:0@2xq", "bad hierarchy dimension 'q'"},
  };
  for (const auto& [text, fragment] : cases) {
    StatusOr<PlacementProto> p = ParsePlacementText(text);
    ASSERT_FALSE(p.ok()) << "'" << text << "' parsed";
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(fragment), std::string::npos)
        << "'" << text << "': " << p.status();
    EXPECT_NE(p.status().message().find("placement '"), std::string::npos) << p.status();
  }
}

TEST(PlacementTextTest, CheckRejectsMalformedProtos) {
  PlacementProto proto;
  proto.set_device_type(DEVICE_CPU);
  proto.add_machine_id(0);
  EXPECT_NE(CheckPlacementProto(proto).message().find("no device ids"), std::string::npos);
  proto.add_device_id(1);
  proto.add_device_id(0);
  EXPECT_NE(CheckPlacementProto(proto).message().find("ascending and unique"), std::string::npos);
  proto.set_device_id(1, 2);
  EXPECT_TRUE(CheckPlacementProto(proto).ok());
  proto.set_machine_id(0, -1);
  EXPECT_NE(CheckPlacementProto(proto).message().find("negative machine id"), std::string::npos);
}

}  // namespace
}  // namespace oflite
