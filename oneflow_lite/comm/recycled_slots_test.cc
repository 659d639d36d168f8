#include "oneflow_lite/comm/recycled_slots.h"

#include <gtest/gtest.h>

namespace oflite {
namespace comm {
namespace {

TEST(RecycledSlotsTest, TakesTheSlotFreedLast) {
  RecycledSlots slots(4);
  // One chunk per step: every WRITE goes to the same slot.
  for (int call = 0; call < 3; ++call) {
    ASSERT_TRUE(slots.HasFree());
    EXPECT_EQ(slots.TakeFreedLast(), 0u) << "call " << call;
    slots.Free(1);
  }
  // Four in flight take every slot; the ACKs free them oldest first, and
  // the next WRITEs take them back newest first.
  EXPECT_EQ(slots.TakeFreedLast(), 0u);
  EXPECT_EQ(slots.TakeFreedLast(), 1u);
  EXPECT_EQ(slots.TakeFreedLast(), 2u);
  EXPECT_EQ(slots.TakeFreedLast(), 3u);
  EXPECT_FALSE(slots.HasFree());
  EXPECT_EQ(slots.InFlight(), 4u);
  slots.Free(2);  // 0, then 1
  EXPECT_EQ(slots.TakeFreedLast(), 1u);
  EXPECT_EQ(slots.TakeFreedLast(), 0u);
  EXPECT_FALSE(slots.HasFree());
  slots.Free(4);  // 2, 3, 1, 0
  EXPECT_EQ(slots.InFlight(), 0u);
  EXPECT_EQ(slots.TakeFreedLast(), 0u);
  EXPECT_EQ(slots.TakeFreedLast(), 1u);
  EXPECT_EQ(slots.TakeFreedLast(), 3u);
  EXPECT_EQ(slots.TakeFreedLast(), 2u);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
