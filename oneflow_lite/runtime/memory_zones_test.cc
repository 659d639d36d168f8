// MemoryZones: host zones in host memory; device zones of a backend's type
// and pinned-host zones from the backend; without one, pinned zones are host
// memory and a CUDA zone is Unimplemented naming the zone.
#include "oneflow_lite/runtime/memory_zones.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace oflite {
namespace {

// Hands out host memory and records what it was asked for (a stand-in for
// the CUDA backend, which needs a GPU).
class RecordingBackend : public DeviceBackend {
 public:
  DeviceType device_type() const override { return DEVICE_CUDA; }
  StatusOr<std::unique_ptr<MemoryBlock>> AllocateDevice(int device_index, int64_t bytes,
                                                        const std::string& zone_name) override {
    calls.push_back("device " + std::to_string(device_index) + " " + std::to_string(bytes) +
                    " " + zone_name);
    if (fail_device) return ResourceExhaustedError("memory zone ", zone_name, ": out of memory");
    return AllocateHostBlock(bytes, zone_name);
  }
  StatusOr<std::unique_ptr<MemoryBlock>> AllocatePinnedHost(int64_t bytes,
                                                            const std::string& zone_name) override {
    calls.push_back("pinned " + std::to_string(bytes) + " " + zone_name);
    return AllocateHostBlock(bytes, zone_name);
  }
  StatusOr<std::unique_ptr<DeviceContext>> CreateStreamContext(int, const std::string&) override {
    return UnimplementedError("not used here");
  }
  std::vector<std::string> calls;
  bool fail_device = false;
};

void AddBlock(MachinePlan* plan, MemZoneType type, DeviceType device, int index, int64_t size) {
  MemBlockProto* block = plan->add_mem_block();
  block->mutable_zone()->set_machine_id(0);
  block->mutable_zone()->set_type(type);
  block->mutable_zone()->set_device_type(device);
  block->mutable_zone()->set_device_index(index);
  block->set_size(size);
}

MachinePlan CudaPlan() {
  MachinePlan plan;
  AddBlock(&plan, ZONE_HOST, DEVICE_CPU, 0, 100);
  AddBlock(&plan, ZONE_PINNED_HOST, DEVICE_CPU, 0, 0);
  AddBlock(&plan, ZONE_DEVICE, DEVICE_CUDA, 1, 333);
  return plan;
}

TEST(MemoryZonesTest, BackendAllocatesDeviceAndPinnedZones) {
  RecordingBackend backend;
  const MachinePlan plan = CudaPlan();
  StatusOr<std::unique_ptr<MemoryZones>> zones = MemoryZones::Create(plan, 0, &backend);
  ASSERT_TRUE(zones.ok()) << zones.status();
  EXPECT_EQ(backend.calls,
            (std::vector<std::string>{"pinned 0 m0/pinned_host", "device 1 333 m0/cuda:1"}));
  EXPECT_EQ((*zones)->zone_count(), 3);
  EXPECT_EQ((*zones)->total_bytes(), 433);
  StatusOr<int64_t> size = (*zones)->Size(plan.mem_block(2).zone());
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 333);
  StatusOr<char*> host = (*zones)->Base(plan.mem_block(0).zone());
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*host) % 64, 0u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ((*host)[i], 0);
}

TEST(MemoryZonesTest, WithoutBackendPinnedIsHostAndCudaIsUnimplemented) {
  MachinePlan plan;
  AddBlock(&plan, ZONE_PINNED_HOST, DEVICE_CPU, 0, 17);
  StatusOr<std::unique_ptr<MemoryZones>> zones = MemoryZones::Create(plan);
  ASSERT_TRUE(zones.ok()) << zones.status();
  zones = MemoryZones::Create(CudaPlan());
  ASSERT_FALSE(zones.ok());
  EXPECT_EQ(zones.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(zones.status().message().find("m0/cuda:1"), std::string::npos) << zones.status();
}

TEST(MemoryZonesTest, BackendFailureIsReturned) {
  RecordingBackend backend;
  backend.fail_device = true;
  StatusOr<std::unique_ptr<MemoryZones>> zones = MemoryZones::Create(CudaPlan(), 0, &backend);
  ASSERT_FALSE(zones.ok());
  EXPECT_EQ(zones.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(zones.status().message().find("m0/cuda:1"), std::string::npos) << zones.status();
}

}  // namespace
}  // namespace oflite
