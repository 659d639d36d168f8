#include "oneflow_lite/runtime/register_slots.h"

#include <gtest/gtest.h>

#include "oneflow_lite/runtime/memory_zones.h"
#include "oneflow_lite/runtime/regst.h"
#include "oneflow_lite/runtime/testing/test_plan_builder.h"

namespace oflite {
namespace {

class RegisterSlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TestPlanBuilder builder;
    producer_ = builder.AddTask("producer", TASK_SOURCE);
    consumer_a_ = builder.AddTask("a", TASK_COMPUTE);
    consumer_b_ = builder.AddTask("b", TASK_COMPUTE);
    desc_ = builder.AddRegst(producer_, "out", {TensorDesc(Shape{3}, DT_FLOAT)}, /*regst_num=*/2);
    builder.Consume(consumer_a_, desc_);
    builder.Consume(consumer_b_, desc_);
    plan_ = builder.Build(4);
    zones_ = MemoryZones::Create(plan_.machine(0)).value();
    store_ = RegstStore::Create(plan_.machine(0), *zones_).value();
  }

  Plan plan_;
  int64_t producer_ = 0, consumer_a_ = 0, consumer_b_ = 0, desc_ = 0;
  std::unique_ptr<MemoryZones> zones_;
  std::unique_ptr<RegstStore> store_;
};

TEST_F(RegisterSlotsTest, RegistersAreCutOutOfOneBlockWithoutOverlap) {
  Regst* first = store_->Get(desc_, 0);
  Regst* second = store_->Get(desc_, 1);
  ASSERT_EQ(first->blobs.size(), 1u);
  EXPECT_EQ(second->base - first->base, 64);  // 12 bytes rounded to 64
  EXPECT_EQ(zones_->zone_count(), 1);
  EXPECT_EQ(zones_->total_bytes(), 128);
  EXPECT_EQ(store_->Find(desc_, 2).status().code(), StatusCode::kNotFound);
}

TEST_F(RegisterSlotsTest, ProducedCopyIsFreeAfterAllConsumersReturn) {
  ProducedSlots slots;
  slots.AddDesc(desc_, {store_->Get(desc_, 0), store_->Get(desc_, 1)},
                {consumer_a_, consumer_b_});
  std::vector<int64_t> send_to;
  EXPECT_TRUE(slots.AllFree());
  Regst* r0 = slots.Acquire(desc_);
  EXPECT_EQ(slots.MarkProduced(r0), (std::vector<int64_t>{consumer_a_, consumer_b_}));
  Regst* r1 = slots.Acquire(desc_);
  slots.MarkProduced(r1);
  EXPECT_FALSE(slots.AllHaveFree());  // regst_num 2 bounds the pipeline
  EXPECT_NE(slots.DescribeMissing().find("all 2 copies out"), std::string::npos);
  ASSERT_TRUE(slots.OnReturned(desc_, 0, &send_to).ok());
  EXPECT_FALSE(slots.AllHaveFree());
  ASSERT_TRUE(slots.OnReturned(desc_, 0, &send_to).ok());
  EXPECT_TRUE(slots.AllHaveFree());
  EXPECT_EQ(slots.Acquire(desc_), r0);
  // Returning a copy nobody holds is an error, not a silent corruption.
  EXPECT_EQ(slots.OnReturned(desc_, 0, &send_to).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(slots.OnReturned(desc_ + 100, 0, &send_to).code(), StatusCode::kInvalidArgument);
}

TEST_F(RegisterSlotsTest, ProducedWithoutConsumersIsFreeAtOnce) {
  ProducedSlots slots;
  slots.AddDesc(desc_, {store_->Get(desc_, 0)}, {});
  EXPECT_TRUE(slots.MarkProduced(slots.Acquire(desc_)).empty());
  EXPECT_TRUE(slots.AllFree());
}

TEST_F(RegisterSlotsTest, MutatorsGetTheCopyAfterEveryReaderReturnedIt) {
  ProducedSlots slots;
  slots.AddDesc(desc_, {store_->Get(desc_, 0)}, {consumer_a_}, {consumer_b_});
  std::vector<int64_t> send_to;
  EXPECT_EQ(slots.MarkProduced(slots.Acquire(desc_)), std::vector<int64_t>{consumer_a_});
  ASSERT_TRUE(slots.OnReturned(desc_, 0, &send_to).ok());
  EXPECT_EQ(send_to, std::vector<int64_t>{consumer_b_});
  EXPECT_FALSE(slots.AllFree());
  ASSERT_TRUE(slots.OnReturned(desc_, 0, &send_to).ok());
  EXPECT_TRUE(send_to.empty());
  EXPECT_TRUE(slots.AllFree());
  // Only mutators: they get it at once.
  ProducedSlots only;
  only.AddDesc(desc_, {store_->Get(desc_, 0)}, {}, {consumer_b_});
  EXPECT_EQ(only.MarkProduced(only.Acquire(desc_)), std::vector<int64_t>{consumer_b_});
}

TEST_F(RegisterSlotsTest, ConsumedFifoAndEndOfData) {
  ConsumedSlots slots;
  slots.AddDesc(desc_, producer_);
  EXPECT_FALSE(slots.AllReadable());
  EXPECT_NE(slots.DescribeMissing().find("waiting for register"), std::string::npos);
  ASSERT_TRUE(slots.OnProduced(store_->Get(desc_, 1)).ok());
  ASSERT_TRUE(slots.OnProduced(store_->Get(desc_, 0)).ok());
  EXPECT_TRUE(slots.AllReadable());
  EXPECT_EQ(slots.Front(desc_)->index, 1);
  ASSERT_TRUE(slots.OnEndOfData(desc_).ok());
  EXPECT_FALSE(slots.AllDrained());
  EXPECT_EQ(slots.PopFronts()[0]->index, 1);
  EXPECT_EQ(slots.PopFronts()[0]->index, 0);
  EXPECT_TRUE(slots.AllDrained());
  EXPECT_EQ(slots.OnEndOfData(desc_ + 1).code(), StatusCode::kInvalidArgument);
}

TEST(MemoryZonesTest, AllocationFailureNamesTheZone) {
  testing::TestPlanBuilder builder;
  const int64_t task = builder.AddTask("big", TASK_SOURCE);
  builder.AddRegst(task, "out", {TensorDesc(Shape{1024}, DT_FLOAT)}, 1);
  Plan plan = builder.Build(1);
  StatusOr<std::unique_ptr<MemoryZones>> zones = MemoryZones::Create(plan.machine(0), 1000);
  ASSERT_EQ(zones.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(zones.status().message().find("m0/host"), std::string::npos);
  EXPECT_NE(zones.status().message().find("4096"), std::string::npos);
}

TEST(MemoryZonesTest, RegisterOutsideItsZoneIsRejected) {
  testing::TestPlanBuilder builder;
  const int64_t task = builder.AddTask("t", TASK_SOURCE);
  builder.AddRegst(task, "out", {TensorDesc(Shape{16}, DT_FLOAT)}, 1);
  Plan plan = builder.Build(1);
  plan.mutable_machine(0)->mutable_mem_block(0)->set_size(32);
  auto zones = MemoryZones::Create(plan.machine(0)).value();
  StatusOr<std::unique_ptr<RegstStore>> store = RegstStore::Create(plan.machine(0), *zones);
  ASSERT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("outside zone"), std::string::npos);
}

}  // namespace
}  // namespace oflite
