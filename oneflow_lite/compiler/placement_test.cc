#include "oneflow_lite/compiler/placement.h"

#include <gtest/gtest.h>

namespace oflite {
namespace compiler {
namespace {

ClusterProto TwoMachines(int cpus, int gpus) {
  ClusterProto c;
  for (int i = 0; i < 2; ++i) {
    MachineProto* m = c.add_machine();
    m->set_id(i);
    m->set_cpu_devices(cpus);
    m->set_cuda_devices(gpus);
  }
  return c;
}

TEST(PlacementTest, ParsesRangesListsAndHierarchy) {
  auto p = ParsePlacementText("0-1:cuda:0-3");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device_type(), DEVICE_CUDA);
  EXPECT_EQ(p->machine_id_size(), 2);
  EXPECT_EQ(p->device_id_size(), 4);
  EXPECT_EQ(ParallelNum(*p), 8);
  EXPECT_EQ(PlacementToString(*p), "0-1:cuda:0-3");
  auto q = ParsePlacementText("0,2:cpu:1@2x1");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(PlacementToString(*q), "0,2:cpu:1@2x1");
  auto single = ParsePlacementText("0:cpu:0");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(ParallelNum(*single), 1);
  EXPECT_TRUE(IsSingleMachine(*single));
}

TEST(PlacementTest, ParallelIdsAreMachineMajor) {
  auto p = ParsePlacementText("0-1:cpu:0-1");
  ASSERT_TRUE(p.ok());
  std::vector<DeviceRef> d = PlacementDevices(*p);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[1].ToString(), "m0:cpu:1");
  EXPECT_EQ(d[2].ToString(), "m1:cpu:0");
}

TEST(PlacementTest, RejectsMalformedText) {
  for (const char* bad : {"", "0:cpu", "0:tpu:0", "1-0:cpu:0", "0:cpu:x", "0,0:cpu:0",
                          "0:cpu:0@"}) {
    auto p = ParsePlacementText(bad);
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) {
      EXPECT_NE(p.status().message().find("placement"), std::string::npos) << bad;
    }
  }
}

TEST(PlacementTest, ValidationNamesMachineDeviceAndCluster) {
  ClusterProto c = TwoMachines(2, 0);
  EXPECT_TRUE(ValidatePlacement(*ParsePlacementText("0-1:cpu:0-1"), c).ok());
  Status s = ValidatePlacement(*ParsePlacementText("0-2:cpu:0"), c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("machine 2"), std::string::npos) << s;
  EXPECT_NE(s.message().find("2 machine(s)"), std::string::npos) << s;
  s = ValidatePlacement(*ParsePlacementText("1:cuda:0"), c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cuda:0 on machine 1"), std::string::npos) << s;
  PlacementProto bad_hierarchy = *ParsePlacementText("0-1:cpu:0-1");
  bad_hierarchy.mutable_hierarchy()->add_dim(3);
  s = ValidatePlacement(bad_hierarchy, c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("hierarchy has 3 devices, the placement has 4"), std::string::npos)
      << s;
}

TEST(PlacementTest, ClusterValidationNamesField) {
  ClusterProto c = TwoMachines(1, 0);
  EXPECT_TRUE(ValidateCluster(c).ok());
  c.mutable_machine(1)->set_id(5);
  Status s = ValidateCluster(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("machine[1].id"), std::string::npos) << s;
  EXPECT_FALSE(ValidateCluster(ClusterProto()).ok());
  c = TwoMachines(-1, 0);
  EXPECT_FALSE(ValidateCluster(c).ok());
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
