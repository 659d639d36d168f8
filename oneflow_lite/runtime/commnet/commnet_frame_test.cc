#include "oneflow_lite/runtime/commnet/commnet_frame.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/common/id.h"

namespace oflite {
namespace {

int64_t TaskOn(int64_t machine, int64_t index) {
  return (machine << kMachineShift) | (int64_t{3} << kStreamShift) | index;
}

ActorMessage SomeProduced() { return ActorMessage::Produced(TaskOn(0, 1), TaskOn(1, 2), 7, 1, 5); }

// Expects `status` to be DataLoss with `words` in its message.
void ExpectDataLoss(const Status& status, const std::string& words) {
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find(words), std::string::npos) << status;
}

TEST(CommNetFrameTest, MessageFrameIsVersionTypeAndActorMessage) {
  const ActorMessage message = ActorMessage::EndOfData(TaskOn(0, 1), TaskOn(1, 2), 7);
  StatusOr<std::string> bytes = EncodeMessageFrame(message);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_EQ(bytes->size(), kCommNetFrameHeaderBytes);
  EXPECT_EQ(static_cast<uint8_t>((*bytes)[0]), kCommNetWireVersion);
  EXPECT_EQ(static_cast<uint8_t>((*bytes)[1]), 1);
  StatusOr<CommNetFrame> frame = DecodeCommNetFrame(*bytes);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->type, CommNetFrameType::kMessage);
  EXPECT_EQ(frame->message, message);
}

TEST(CommNetFrameTest, DataFramesRoundTripChunksOfSizes0And1AndOdd) {
  const std::string payload = "abcdefghijklm";  // 13 bytes
  for (size_t size : {size_t{0}, size_t{1}, size_t{7}}) {
    const std::string chunk = payload.substr(3, size);
    StatusOr<std::string> bytes = EncodeDataFrame(SomeProduced(), payload.size(), 3, chunk);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(bytes->size(), kDataFrameHeaderBytes + size);
    EXPECT_EQ(static_cast<uint8_t>((*bytes)[1]), 2);
    StatusOr<CommNetFrame> frame = DecodeCommNetFrame(*bytes);
    ASSERT_TRUE(frame.ok()) << frame.status();
    EXPECT_EQ(frame->type, CommNetFrameType::kData);
    EXPECT_EQ(frame->message, SomeProduced());
    EXPECT_EQ(frame->chunk_total, 13u);
    EXPECT_EQ(frame->chunk_offset, 3u);
    EXPECT_EQ(std::string(frame->chunk_bytes), chunk);
  }
}

TEST(CommNetFrameTest, BounceFramesRoundTripShapesOfRank0To3) {
  BounceAnnouncement announcement;
  announcement.payload = 0x0102030405060708ull;
  announcement.total = 1234;
  announcement.shapes = {Shape(std::vector<int64_t>{}), Shape({0}), Shape({3, 1, 7})};
  StatusOr<std::string> bytes = EncodeBounceFrame(SomeProduced(), announcement);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // Header, payload, total, blob count, then per blob u32 rank and the dims.
  EXPECT_EQ(bytes->size(), kCommNetFrameHeaderBytes + 20 + (4) + (4 + 8) + (4 + 24));
  // Little-endian: the payload number's lowest byte comes first.
  EXPECT_EQ(static_cast<uint8_t>((*bytes)[kCommNetFrameHeaderBytes]), 0x08);
  StatusOr<CommNetFrame> frame = DecodeCommNetFrame(*bytes);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->type, CommNetFrameType::kBounce);
  EXPECT_EQ(frame->message, SomeProduced());
  EXPECT_EQ(frame->bounce.payload, announcement.payload);
  EXPECT_EQ(frame->bounce.total, 1234u);
  EXPECT_EQ(frame->bounce.shapes, announcement.shapes);
}

TEST(CommNetFrameTest, LocalOnlyMessagesAreRefusedByTheEncoder) {
  const ActorMessage wakeup = ActorMessage::Wakeup(TaskOn(0, 1), 3);
  EXPECT_EQ(EncodeMessageFrame(wakeup).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeDataFrame(wakeup, 0, 0, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeBounceFrame(wakeup, BounceAnnouncement()).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CommNetFrameTest, TruncatedFramesNameWhatIsMissing) {
  StatusOr<std::string> message = EncodeMessageFrame(SomeProduced());
  ASSERT_TRUE(message.ok());
  ExpectDataLoss(DecodeCommNetFrame("").status(), "0 bytes, shorter than its 39-byte header");
  ExpectDataLoss(DecodeCommNetFrame(message->substr(0, 38)).status(),
                 "38 bytes, shorter than its 39-byte header");

  StatusOr<std::string> data = EncodeDataFrame(SomeProduced(), 5, 0, "hello");
  ASSERT_TRUE(data.ok());
  ExpectDataLoss(DecodeCommNetFrame(data->substr(0, kDataFrameHeaderBytes - 1)).status(),
                 "data frame of 54 bytes, shorter than its 55-byte header");

  BounceAnnouncement announcement;
  announcement.total = 28;
  announcement.shapes = {Shape({7}), Shape({2, 3})};
  StatusOr<std::string> bounce = EncodeBounceFrame(SomeProduced(), announcement);
  ASSERT_TRUE(bounce.ok());
  ExpectDataLoss(DecodeCommNetFrame(bounce->substr(0, kCommNetFrameHeaderBytes + 19)).status(),
                 "bounce frame: 19 bytes after the header");
  // Cut inside the second blob's rank, then inside its dims.
  const size_t second = kCommNetFrameHeaderBytes + 20 + 12;
  ExpectDataLoss(DecodeCommNetFrame(bounce->substr(0, second + 2)).status(),
                 "truncated shape of blob 1 of 2");
  ExpectDataLoss(DecodeCommNetFrame(bounce->substr(0, second + 4 + 15)).status(),
                 "blob 1 of rank 2");
  // Every shorter prefix fails; none is taken for a smaller frame.
  for (size_t size = 0; size < bounce->size(); ++size) {
    EXPECT_EQ(DecodeCommNetFrame(bounce->substr(0, size)).status().code(), StatusCode::kDataLoss)
        << size << " bytes";
  }
}

TEST(CommNetFrameTest, MalformedFramesNameTheirFault) {
  StatusOr<std::string> message = EncodeMessageFrame(SomeProduced());
  ASSERT_TRUE(message.ok());
  std::string other_version = *message;
  other_version[0] = 3;
  ExpectDataLoss(DecodeCommNetFrame(other_version).status(), "wire version 3, this build speaks 2");
  std::string unknown_type = *message;
  unknown_type[1] = 9;
  ExpectDataLoss(DecodeCommNetFrame(unknown_type).status(), "unknown type 9");
  std::string bad_kind = *message;
  bad_kind[2] = 0x7f;  // the actor message's kind
  EXPECT_EQ(DecodeCommNetFrame(bad_kind).status().code(), StatusCode::kDataLoss);

  BounceAnnouncement announcement;
  announcement.shapes = {Shape({4})};
  StatusOr<std::string> bounce = EncodeBounceFrame(SomeProduced(), announcement);
  ASSERT_TRUE(bounce.ok());
  ExpectDataLoss(DecodeCommNetFrame(*bounce + "x").status(), "1 stray bytes after 1 shapes");
  std::string negative = *bounce;
  negative[negative.size() - 1] = static_cast<char>(0x80);  // top byte of the dim
  ExpectDataLoss(DecodeCommNetFrame(negative).status(), "blob 0 has a negative dimension");
  announcement.shapes = {Shape(std::vector<int64_t>(17, 1))};
  bounce = EncodeBounceFrame(SomeProduced(), announcement);
  ASSERT_TRUE(bounce.ok());
  ExpectDataLoss(DecodeCommNetFrame(*bounce).status(), "blob 0 of rank 17 (at most 16");
}

}  // namespace
}  // namespace oflite
