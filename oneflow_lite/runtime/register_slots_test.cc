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

// The queue keeps first-in first-out order across its inline ring's wrap,
// when it outgrows the ring (mid-wrap) and when copied.
TEST(RegstQueueTest, FifoAcrossWrapGrowthAndCopy) {
  std::vector<Regst> regsts(40);
  RegstQueue queue;
  int next_in = 0, next_out = 0;
  // Hold 3, then cycle so the inline ring wraps several times.
  for (; next_in < 3; ++next_in) queue.push_back(&regsts[next_in]);
  for (int i = 0; i < 9; ++i) {
    queue.push_back(&regsts[next_in++]);
    ASSERT_EQ(queue.front(), &regsts[next_out++]);
    queue.pop_front();
  }
  // Grow while the ring is wrapped, past the inline four and then twice more.
  for (; next_in < 30; ++next_in) queue.push_back(&regsts[next_in]);
  EXPECT_EQ(queue.size(), static_cast<size_t>(next_in - next_out));
  RegstQueue copy = queue;
  RegstQueue assigned;
  assigned.push_back(&regsts[39]);
  assigned = copy;
  for (RegstQueue* q : {&queue, &copy, &assigned}) {
    for (int i = next_out; i < next_in; ++i) {
      ASSERT_FALSE(q->empty());
      ASSERT_EQ(q->front(), &regsts[i]) << "element " << i;
      q->pop_front();
    }
    EXPECT_TRUE(q->empty());
    // Still usable after draining a grown ring.
    q->push_back(&regsts[0]);
    EXPECT_EQ(q->front(), &regsts[0]);
  }
}

// Descs added out of order are kept in id order (PopFronts' order), and
// each input ends once: a repeated end-of-data changes nothing.
TEST_F(RegisterSlotsTest, ConsumedDescsInIdOrderAndEndOfDataCountedOnce) {
  ConsumedSlots slots;
  slots.AddDesc(desc_ + 7, producer_);
  slots.AddDesc(desc_, producer_);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots.desc_at(0), desc_);
  EXPECT_EQ(slots.desc_at(1), desc_ + 7);
  EXPECT_TRUE(slots.Consumes(desc_ + 7));
  EXPECT_FALSE(slots.Consumes(desc_ + 1));
  ASSERT_TRUE(slots.OnEndOfData(desc_).ok());
  ASSERT_TRUE(slots.OnEndOfData(desc_).ok());
  EXPECT_FALSE(slots.AllDrained());  // desc_ + 7 has not ended
  ASSERT_TRUE(slots.OnEndOfData(desc_ + 7).ok());
  EXPECT_TRUE(slots.AllDrained());
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
