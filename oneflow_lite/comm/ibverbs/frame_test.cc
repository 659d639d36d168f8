#include "oneflow_lite/comm/ibverbs/frame.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

namespace oflite {
namespace comm {
namespace ibverbs {
namespace {

Endpoint Sample() {
  Endpoint endpoint;
  endpoint.rank = 3;
  endpoint.world_size = 5;
  endpoint.qp_num = 0xabcdef;
  endpoint.psn = 0x123456;
  endpoint.lid = 17;
  endpoint.link_layer = IBV_LINK_LAYER_ETHERNET;
  endpoint.active_mtu = IBV_MTU_1024;
  for (int i = 0; i < 16; ++i) endpoint.gid[i] = static_cast<uint8_t>(i * 9);
  endpoint.has_gid = 1;
  endpoint.max_message_size = 1u << 30;
  endpoint.message_slots = 64;
  endpoint.slot_size = 4096;
  endpoint.ring = {0x7f0011223344ull, 64 * 4096, 0x4321};
  return endpoint;
}

TEST(EndpointTest, RoundTripsEveryField) {
  Endpoint endpoint = Sample();
  auto decoded = Endpoint::Decode(endpoint.Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->rank, 3u);
  EXPECT_EQ(decoded->world_size, 5u);
  EXPECT_EQ(decoded->qp_num, 0xabcdefu);
  EXPECT_EQ(decoded->psn, 0x123456u);
  EXPECT_EQ(decoded->lid, 17);
  EXPECT_EQ(decoded->link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(decoded->active_mtu, IBV_MTU_1024);
  EXPECT_EQ(std::string(decoded->gid, decoded->gid + 16),
            std::string(endpoint.gid, endpoint.gid + 16));
  EXPECT_EQ(decoded->has_gid, 1);
  EXPECT_EQ(decoded->max_message_size, 1u << 30);
  EXPECT_EQ(decoded->message_slots, 64u);
  EXPECT_EQ(decoded->slot_size, 4096u);
  EXPECT_EQ(decoded->ring, endpoint.ring);
}

TEST(EndpointTest, RejectsForeignTruncatedAndFutureBlobs) {
  std::string bytes = Sample().Encode();
  EXPECT_EQ(Endpoint::Decode("rank 1 127.0.0.1:4000").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(Endpoint::Decode("").ok());
  for (size_t cut : {size_t{4}, size_t{20}, bytes.size() - 1}) {
    EXPECT_FALSE(Endpoint::Decode(bytes.substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(Endpoint::Decode(bytes + "x").ok());
  std::string future = bytes;
  future[4] = 2;  // version 2
  auto status = Endpoint::Decode(future).status();
  EXPECT_NE(status.message().find("version 2"), std::string::npos) << status;
}

TEST(SlotHeaderTest, EncodesLengthAndRejectsGarbage) {
  uint8_t slot[16] = {};
  EncodeSlotHeader(1000, slot);
  uint32_t length = 0;
  ASSERT_TRUE(DecodeSlotHeader(slot, 4088, &length));
  EXPECT_EQ(length, 1000u);
  EXPECT_FALSE(DecodeSlotHeader(slot, 999, &length));  // beyond the slot
  slot[0] = 7;
  EXPECT_FALSE(DecodeSlotHeader(slot, 4088, &length));
}

TEST(ImmTest, KindsAndCountsRoundTripAcrossWraparound) {
  EXPECT_EQ(DecodeImmKind(EncodeImm(ImmKind::kMessage, 5)), ImmKind::kMessage);
  EXPECT_EQ(DecodeImmKind(EncodeImm(ImmKind::kCredit, 5)), ImmKind::kCredit);
  EXPECT_EQ(DecodeImmKind(EncodeImm(ImmKind::kGoodbye, 0)), ImmKind::kGoodbye);
  // The count travels in 30 bits; the receiver knows how many it sent.
  const uint64_t sent = (1ull << 31) + 100;
  for (uint64_t consumed : {sent, sent - 1, sent - 64, sent - 1000}) {
    uint32_t imm = EncodeImm(ImmKind::kCredit, consumed);
    EXPECT_EQ(ExpandCount(imm, sent), consumed);
  }
  EXPECT_EQ(ExpandCount(EncodeImm(ImmKind::kMessage, 0), 0), 0u);
  EXPECT_EQ(ExpandCount(EncodeImm(ImmKind::kMessage, 1), 3), 1u);
}

}  // namespace
}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
