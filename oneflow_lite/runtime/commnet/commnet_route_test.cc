#include "oneflow_lite/runtime/commnet/commnet_route.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/runtime/commnet/regst_payload.h"

namespace oflite {
namespace {

using std::chrono::milliseconds;

int64_t TaskOn(int64_t machine, int64_t index) {
  return (machine << kMachineShift) | (int64_t{3} << kStreamShift) | index;
}

// A register of `count` floats (plus a second, dynamic blob of up to 4
// int32s holding `dynamic` of them), backed by `storage`.
struct TestRegst {
  TestRegst(int64_t count, int64_t dynamic) {
    desc.set_regst_desc_id(7);
    desc.add_blob()->set_bytes(count * 4);
    desc.add_blob()->set_bytes(16);
    storage.assign(count * 4 + 16, 0);
    regst.desc = &desc;
    regst.base = storage.data();
    regst.blobs.emplace_back(storage.data(), TensorDesc(Shape({count}), DT_FLOAT));
    regst.blobs.emplace_back(storage.data() + count * 4, TensorDesc(Shape({dynamic}), DT_INT32));
  }
  RegstDescProto desc;
  std::vector<char> storage;
  Regst regst;
};

TEST(RegstPayloadTest, RoundTripsValidBytesOnlyForSizes0And1AndOdd) {
  for (int64_t count : {0, 1, 7}) {
    TestRegst src(count, 3);
    float* values = static_cast<float*>(src.regst.blobs[0].raw());
    for (int64_t i = 0; i < count; ++i) values[i] = 0.5f + i;
    int32_t* ints = static_cast<int32_t*>(src.regst.blobs[1].raw());
    for (int i = 0; i < 4; ++i) ints[i] = 10 + i;
    const std::string payload = SerializeRegst(src.regst);
    // Headers (rank, dim, bytes per blob) plus the valid bytes: 3 of 4 ints.
    EXPECT_EQ(payload.size(), 2 * 24 + count * 4 + 12);
    TestRegst dst(count, 4);
    ASSERT_TRUE(DeserializeRegst(payload, &dst.regst).ok());
    EXPECT_EQ(dst.regst.blobs[1].shape(), Shape({3}));
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(static_cast<float*>(dst.regst.blobs[0].raw())[i], 0.5f + i);
    }
    EXPECT_EQ(static_cast<int32_t*>(dst.regst.blobs[1].raw())[2], 12);
    EXPECT_EQ(static_cast<int32_t*>(dst.regst.blobs[1].raw())[3], 0);
  }
}

TEST(RegstPayloadTest, RejectsTruncatedOrOversizedPayloads) {
  TestRegst src(5, 2);
  const std::string payload = SerializeRegst(src.regst);
  TestRegst dst(5, 2);
  EXPECT_EQ(DeserializeRegst(payload.substr(0, payload.size() - 1), &dst.regst).code(),
            StatusCode::kDataLoss);
  TestRegst small(4, 2);  // blob 0 holds 4 floats, the payload has 5
  EXPECT_EQ(DeserializeRegst(payload, &small.regst).code(), StatusCode::kDataLoss);
}

int FreePort() {
  int port = 0;
  auto fd = comm::ListenTcp("127.0.0.1", &port);
  CHECK(fd.ok());
  ::close(*fd);
  return port;
}

// Two real CommNets over TCP in one process: messages and a register larger
// than one transport message travel in order from machine 0 to machine 1.
// Sends a 400 KB register and an end-of-data from machine 0 to machine 1
// over transports with `message_slot_size`-byte messages (0: the default)
// and checks both arrive in order, the bytes intact, in the kData frames
// the chunk size gives.
void CarryChunkedRegister(size_t message_slot_size) {
  const std::string master = "127.0.0.1:" + std::to_string(FreePort());
  std::vector<std::unique_ptr<comm::CommNet>> nets(2);
  std::vector<Status> started(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      comm::CommNetOptions options;
      options.rank = rank;
      options.world_size = 2;
      options.master = master;
      options.job_token = "route-test";
      options.connect_timeout = milliseconds(20000);
      if (message_slot_size > 0) options.transport.message_slot_size = message_slot_size;
      auto net = comm::CommNet::Start(options);
      if (!net.ok()) {
        started[rank] = net.status();
        return;
      }
      nets[rank] = std::move(*net);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(started[0].ok()) << started[0].ToString();
  ASSERT_TRUE(started[1].ok()) << started[1].ToString();

  std::vector<Status> errors;
  LocalMessageBus bus0(0), bus1(1);
  Inbox inbox1;
  const int64_t producer = TaskOn(0, 1), consumer = TaskOn(1, 2);
  bus1.RegisterInbox(StreamKeyOfTaskId(consumer), &inbox1);
  CommNetRoute route0(nets[0].get(), [&](const Status& s) { errors.push_back(s); });
  CommNetRoute route1(nets[1].get(), [&](const Status& s) { errors.push_back(s); });
  bus0.SetRemoteRoute(&route0);
  route0.Attach(&bus0, nullptr);
  route1.Attach(&bus1, nullptr);

  TestRegst big(100000, 2);  // 400 KB: several 4 KiB transport messages
  float* values = static_cast<float*>(big.regst.blobs[0].raw());
  for (int i = 0; i < 100000; ++i) values[i] = static_cast<float>(i);
  const ActorMessage produced = ActorMessage::Produced(producer, consumer, 7, 1, 5);
  ASSERT_TRUE(route0.SendWithData(produced, big.regst).ok());
  ASSERT_TRUE(bus0.Send(ActorMessage::EndOfData(producer, consumer, 7)).ok());

  std::optional<ActorMessage> first = inbox1.Pop(milliseconds(10000));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, produced);
  std::optional<ActorMessage> second = inbox1.Pop(milliseconds(10000));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->kind, MessageKind::kEndOfData);

  StatusOr<std::string> payload = route1.TakePayload(produced);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  TestRegst copy(100000, 2);
  ASSERT_TRUE(DeserializeRegst(*payload, &copy.regst).ok());
  EXPECT_EQ(std::memcmp(copy.storage.data(), big.storage.data(), 400000), 0);
  EXPECT_EQ(route1.TakePayload(produced).status().code(), StatusCode::kNotFound);
  EXPECT_GT(route0.bytes_sent(), 400000);
  // Each frame fills a message up to the transport's size, at most 64 KiB.
  const size_t message = std::min(nets[0]->transport()->GetConnection(1).value()->max_message_size(),
                                  kMaxPushedMessageBytes);
  const size_t chunk = message - comm::MessageRouter::kChannelHeaderSize - kDataFrameHeaderBytes;
  const size_t bytes = SerializeRegst(big.regst).size();
  EXPECT_EQ(route0.data_frames_sent(), static_cast<int64_t>((bytes + chunk - 1) / chunk));
  EXPECT_TRUE(errors.empty());
  route0.Detach();
  route1.Detach();
}

TEST(CommNetRouteTest, CarriesMessagesAndChunkedRegistersInOrder) {
  CarryChunkedRegister(0);  // the transport's default messages (4 KiB)
}

// Larger transport messages (the session's are 64 KiB + 128 bytes) still
// carry pushed chunks in messages of at most kMaxPushedMessageBytes.
TEST(CommNetRouteTest, PushedChunksStayWithin64KiBMessages) {
  CarryChunkedRegister(size_t{256} << 10);
}

}  // namespace
}  // namespace oflite
