#include "oneflow_lite/runtime/actor_message.h"

#include <gtest/gtest.h>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/runtime/message_bus.h"

namespace oflite {
namespace {

int64_t Id(int64_t machine, int device, int64_t index) {
  TaskIdParts parts;
  parts.stream.machine = machine;
  parts.stream.device_type = 1;  // DEVICE_CPU
  parts.stream.device_index = device;
  parts.task_index = index;
  return EncodeTaskId(parts).value();
}

TEST(ActorMessageTest, WireRoundTrip) {
  const ActorMessage messages[] = {
      ActorMessage::Produced(Id(3, 1, 7), Id(0, 0, 1), 42, 2, 123456789012LL),
      ActorMessage::Returned(Id(0, 0, 1), Id(3, 1, 7), 42, 0, 0),
      ActorMessage::EndOfData(Id(1, 2, 3), Id(1, 2, 4), 9),
      ActorMessage::Start(Id(0, 0, 0)),
  };
  for (const ActorMessage& message : messages) {
    StatusOr<std::string> encoded = EncodeActorMessage(message);
    ASSERT_TRUE(encoded.ok()) << encoded.status();
    const std::string& wire = *encoded;
    ASSERT_EQ(wire.size(), static_cast<size_t>(kActorMessageWireBytes));
    StatusOr<ActorMessage> decoded = DecodeActorMessage(wire);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, message) << message.ToString();
  }
}

TEST(ActorMessageTest, DecodeRejectsBadInput) {
  EXPECT_EQ(DecodeActorMessage("short").status().code(), StatusCode::kDataLoss);
  std::string wire = *EncodeActorMessage(ActorMessage::Start(1));
  wire[0] = 9;
  EXPECT_EQ(DecodeActorMessage(wire).status().code(), StatusCode::kDataLoss);
}

// Wake-ups, READ completions and aborts are local to one machine: the codec
// refuses to put them on a wire, naming the kind, and never decodes them.
TEST(ActorMessageTest, LocalKindsNeverTravel) {
  const ActorMessage produced = ActorMessage::Produced(Id(1, 0, 3), Id(0, 0, 2), 7, 1, 5);
  const ActorMessage local[] = {ActorMessage::Wakeup(Id(0, 0, 2), 4),
                                ActorMessage::ReadDone(produced),
                                ActorMessage::Abort(Id(0, 0, 2))};
  const char* names[] = {"wake-up", "read-done", "abort"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(IsWireKind(local[i].kind));
    StatusOr<std::string> encoded = EncodeActorMessage(local[i]);
    ASSERT_FALSE(encoded.ok()) << names[i];
    EXPECT_EQ(encoded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(encoded.status().message().find(names[i]), std::string::npos)
        << encoded.status();
    std::string wire = *EncodeActorMessage(produced);
    wire[0] = static_cast<char>(local[i].kind);
    EXPECT_EQ(DecodeActorMessage(wire).status().code(), StatusCode::kDataLoss) << names[i];
  }
  // A READ completion keeps the register and piece of what it pulled.
  const ActorMessage done = ActorMessage::ReadDone(produced);
  EXPECT_EQ(done.kind, MessageKind::kReadDone);
  EXPECT_EQ(done.src_actor_id, produced.src_actor_id);
  EXPECT_EQ(done.regst_index, 1);
  EXPECT_EQ(done.piece_id, 5);
  EXPECT_TRUE(ActorMessage::Wakeup(Id(0, 0, 2), 4).is_wakeup());
  EXPECT_FALSE(ActorMessage::Start(Id(0, 0, 2)).is_wakeup());
  EXPECT_FALSE(ActorMessage::Abort(Id(0, 0, 2)).is_wakeup());
}

TEST(ActorMessageTest, ToStringNamesBothEnds) {
  const std::string text = ActorMessage::Produced(Id(0, 0, 1), Id(0, 1, 2), 7, 1, 3).ToString();
  EXPECT_NE(text.find("produced"), std::string::npos);
  EXPECT_NE(text.find("regst 7[1]"), std::string::npos);
  EXPECT_NE(text.find("piece 3"), std::string::npos);
}

class RecordingRoute : public RemoteRoute {
 public:
  Status SendRemote(int64_t machine_id, const ActorMessage& message) override {
    machines.push_back(machine_id);
    sent.push_back(message);
    return Status::OK();
  }
  std::vector<int64_t> machines;
  std::vector<ActorMessage> sent;
};

TEST(MessageBusTest, RoutesByMachineAndStream) {
  LocalMessageBus bus(/*machine_id=*/0);
  Inbox stream0, stream1;
  bus.RegisterInbox(StreamKeyOfTaskId(Id(0, 0, 0)), &stream0);
  bus.RegisterInbox(StreamKeyOfTaskId(Id(0, 1, 0)), &stream1);
  RecordingRoute route;
  // Without a route a remote receiver is an error naming the machine.
  Status no_route = bus.Send(ActorMessage::Start(Id(2, 0, 0)));
  EXPECT_EQ(no_route.code(), StatusCode::kUnavailable);
  EXPECT_NE(no_route.message().find("machine 2"), std::string::npos);
  bus.SetRemoteRoute(&route);

  ASSERT_TRUE(bus.Send(ActorMessage::Produced(Id(0, 0, 5), Id(0, 1, 9), 1, 0, 0)).ok());
  ASSERT_TRUE(bus.Send(ActorMessage::Produced(Id(0, 1, 9), Id(0, 0, 5), 2, 1, 0)).ok());
  ASSERT_TRUE(bus.Send(ActorMessage::Produced(Id(0, 0, 5), Id(2, 0, 1), 3, 0, 0)).ok());
  auto on1 = stream1.Pop(std::chrono::milliseconds(100));
  ASSERT_TRUE(on1.has_value());
  EXPECT_EQ(on1->regst_desc_id, 1);
  auto on0 = stream0.Pop(std::chrono::milliseconds(100));
  ASSERT_TRUE(on0.has_value());
  EXPECT_EQ(on0->regst_desc_id, 2);
  ASSERT_EQ(route.sent.size(), 1u);
  EXPECT_EQ(route.machines[0], 2);
  EXPECT_EQ(route.sent[0].regst_desc_id, 3);
  // Unknown local stream.
  EXPECT_EQ(bus.Send(ActorMessage::Start(Id(0, 5, 0))).code(), StatusCode::kUnavailable);
  // Routed: the two local messages and the one handed to the route; the
  // two refused ones (no route, unknown stream) went nowhere.
  EXPECT_EQ(bus.sent_count(), 3);
}

TEST(InboxTest, PopTimesOutAndCloseDrops) {
  Inbox inbox;
  EXPECT_FALSE(inbox.Pop(std::chrono::milliseconds(1)).has_value());
  EXPECT_TRUE(inbox.Push(ActorMessage::Start(1)));
  inbox.Close();
  EXPECT_FALSE(inbox.Push(ActorMessage::Start(2)));
  EXPECT_FALSE(inbox.Pop(std::chrono::milliseconds(1)).has_value());
}

}  // namespace
}  // namespace oflite
