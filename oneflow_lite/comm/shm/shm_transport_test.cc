#include "oneflow_lite/comm/shm/shm_transport.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "oneflow_lite/comm/shm/shm_handshake.h"
#include "oneflow_lite/comm/shm/shm_segment.h"
#include "oneflow_lite/comm/testing/memory_strategy_conformance.h"
#include "oneflow_lite/comm/testing/transport_conformance.h"

namespace oflite {
namespace comm {
namespace {

TransportFactory ShmFactory(const std::string& name, shm::ShmOptions shm_options) {
  return {name,
          [shm_options](const TransportOptions& options) -> StatusOr<std::unique_ptr<Transport>> {
            ASSIGN_OR_RETURN(auto transport, shm::CreateShmTransport(options, shm_options));
            return std::unique_ptr<Transport>(std::move(transport));
          }};
}

shm::ShmOptions InlineCopies() {
  shm::ShmOptions options;
  options.inline_copy_bytes = 1 << 20;  // every copy of the suites on the posting thread
  return options;
}

shm::ShmOptions NoSpin() {
  shm::ShmOptions options;
  options.spin = std::chrono::microseconds(0);  // every wake-up through a doorbell
  return options;
}

shm::ShmOptions CallerProgress() {
  shm::ShmOptions options;
  options.caller_progress = true;  // Transport::Poll drains the rings
  return options;
}

// The defaults; copies on the posting thread; a progress thread that never
// spins (so messages and credits wake it through the sleeping word and the
// doorbell); caller progress (the suites' caller-poll tests deliver on
// their polling threads too).
const auto kShmVariants =
    ::testing::Values(ShmFactory("shm", shm::ShmOptions()),
                      ShmFactory("shm_inline_copies", InlineCopies()),
                      ShmFactory("shm_no_spin", NoSpin()),
                      ShmFactory("shm_caller_progress", CallerProgress()));

INSTANTIATE_TEST_SUITE_P(Shm, TransportConformanceTest, kShmVariants,
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Shm, MemoryStrategyTest, kShmVariants,
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace comm
}  // namespace oflite

namespace oflite {
namespace comm {
namespace shm {
namespace {

using std::chrono::milliseconds;

struct Events {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<int, Status>> errors;
  bool release_handler = false;

  void Add(int peer, const Status& status) {
    std::lock_guard<std::mutex> lock(mutex);
    errors.push_back({peer, status});
    changed.notify_all();
  }
  bool WaitForError(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, timeout, [&] { return !errors.empty(); });
  }
};

TransportOptions Options(int rank, Events* events) {
  TransportOptions options;
  options.rank = rank;
  options.world_size = 2;
  options.message_slots = 4;
  options.message_slot_size = 256;
  options.peer_timeout = milliseconds(500);
  options.on_peer_error = [events](int peer, const Status& status) { events->Add(peer, status); };
  return options;
}

// Shm transports for `options`, connected to each other.
auto ConnectShm(const std::vector<TransportOptions>& options, const ShmOptions& shm_options) {
  TransportFactory factory{
      "shm", [shm_options](const TransportOptions& o) -> StatusOr<std::unique_ptr<Transport>> {
        ASSIGN_OR_RETURN(auto t, CreateShmTransport(o, shm_options));
        return std::unique_ptr<Transport>(std::move(t));
      }};
  return CreateConnectedTransports(factory, options, milliseconds(20000));
}

// A process that is not in the job dials the listener with a forged HELLO:
// it is refused, and the genuine peer still connects afterwards.
TEST(ShmTransportTest, ForgedHelloIsRefusedAndTheRealPeerStillConnects) {
  Events events[2];
  auto rank0 = CreateShmTransport(Options(0, &events[0]), ShmOptions());
  auto rank1 = CreateShmTransport(Options(1, &events[1]), ShmOptions());
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  const std::string endpoint1 = *(*rank1)->LocalEndpoint(0);
  auto decoded = DecodeEndpoint(endpoint1);
  ASSERT_TRUE(decoded.ok());
  const Deadline deadline = DeadlineAfter(milliseconds(10000));
  auto intruder = DialAbstract(decoded->socket_name, deadline, "rank 1");
  ASSERT_TRUE(intruder.ok()) << intruder.status();
  Hello forged{0, 2, 4, 256, /*dialer_nonce=*/1, /*acceptor_nonce=*/2};
  ASSERT_TRUE(SendRecord(*intruder, EncodeHello(forged), {}, "rank 1").ok());
  // Rank 1 takes the forged HELLO for rank 0's and refuses it...
  Status refused = (*rank1)->Connect(0, *(*rank0)->LocalEndpoint(1), deadline);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied) << refused;
  EXPECT_NE(refused.message().find("rank 0"), std::string::npos) << refused;
  std::string answer;
  std::vector<int> fds;
  ASSERT_TRUE(ReceiveRecord(*intruder, deadline, &answer, &fds, "rank 1").ok());
  auto ack = DecodeHelloAck(answer);
  ASSERT_TRUE(ack.ok());
  EXPECT_FALSE(ack->error.empty());
  EXPECT_TRUE(fds.empty());  // no descriptor leaves for a refused dialer
  ::close(*intruder);
  // ...and the real rank 0 then connects.
  std::thread dialer([&] { EXPECT_TRUE((*rank0)->Connect(1, endpoint1, deadline).ok()); });
  EXPECT_TRUE((*rank1)->Connect(0, *(*rank0)->LocalEndpoint(1), deadline).ok());
  dialer.join();
  Connection* link = *(*rank0)->GetConnection(1);
  EXPECT_TRUE(link->SendMessage("hi", 2).ok());
  EXPECT_TRUE(link->Flush(deadline).ok());
}

// A peer that stops consuming (its handler is stuck) fails the connection
// after peer_timeout without a returned credit, naming it.
TEST(ShmTransportTest, PeerThatStopsConsumingFailsAfterPeerTimeout) {
  Events events[2];
  TransportOptions options1 = Options(1, &events[1]);
  Events* stuck = &events[1];
  options1.on_message = [stuck](int, const void*, size_t) {
    std::unique_lock<std::mutex> lock(stuck->mutex);
    stuck->changed.wait_for(lock, milliseconds(20000), [&] { return stuck->release_handler; });
  };
  auto transports = ConnectShm({Options(0, &events[0]), options1}, ShmOptions());
  ASSERT_TRUE(transports.ok()) << transports.status();
  Connection* link = *(*transports)[0]->GetConnection(1);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(link->SendMessage("x", 1).ok());
  ASSERT_TRUE(events[0].WaitForError(milliseconds(20000)));
  {
    std::lock_guard<std::mutex> lock(events[0].mutex);
    EXPECT_EQ(events[0].errors[0].first, 1);
    EXPECT_EQ(events[0].errors[0].second.code(), StatusCode::kDeadlineExceeded);
    EXPECT_NE(events[0].errors[0].second.message().find("rank 1"), std::string::npos);
  }
  EXPECT_FALSE(link->SendMessage("x", 1).ok());  // sticky
  {
    std::lock_guard<std::mutex> lock(events[1].mutex);
    events[1].release_handler = true;
  }
  events[1].changed.notify_all();
}

// With inline_copy_bytes, a small WRITE has landed at the peer when
// PostWrite returns, yet its completion runs later on the progress thread,
// never inside PostWrite (the poster may hold a lock the callback takes).
TEST(ShmTransportTest, SmallWriteIsCopiedByThePosterAndCompletedByTheProgressThread) {
  Events events[2];
  ShmOptions shm_options;
  shm_options.inline_copy_bytes = 4096;
  auto transports = ConnectShm({Options(0, &events[0]), Options(1, &events[1])}, shm_options);
  ASSERT_TRUE(transports.ok()) << transports.status();
  std::vector<uint8_t> source(4096), target(8192, 0);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + 1);
  auto local = (*transports)[0]->RegisterMemory(source.data(), source.size(), kAccessAll);
  auto remote = (*transports)[1]->RegisterMemory(target.data(), target.size(), kAccessAll);
  ASSERT_TRUE(local.ok() && remote.ok());
  Connection* link = *(*transports)[0]->GetConnection(1);
  std::mutex poster_lock, done_mutex;
  std::condition_variable done_changed;
  bool done = false, ran_on_poster = true;
  const std::thread::id poster = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> held(poster_lock);
    ASSERT_TRUE(link->PostWrite(**local, 0, (*remote)->remote_key(), 4096, 4096,
                                [&](const Status& status) {
                                  EXPECT_TRUE(status.ok()) << status;
                                  std::lock_guard<std::mutex> taken(poster_lock);
                                  std::lock_guard<std::mutex> lock(done_mutex);
                                  ran_on_poster = std::this_thread::get_id() == poster;
                                  done = true;
                                  done_changed.notify_all();
                                })
                    .ok());
    // Landed already: the copy ran inside PostWrite, on this thread.
    EXPECT_TRUE(std::equal(source.begin(), source.end(), target.begin() + 4096));
    EXPECT_TRUE(
        std::all_of(target.begin(), target.begin() + 4096, [](uint8_t b) { return b == 0; }));
  }
  std::unique_lock<std::mutex> lock(done_mutex);
  ASSERT_TRUE(done_changed.wait_for(lock, milliseconds(20000), [&] { return done; }));
  EXPECT_FALSE(ran_on_poster);
}

// Mappings of memfds named by AllocateRegistered's regions in this process.
int RegisteredMappings() {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("oflite-shm-registered") != std::string::npos) ++count;
  }
  return count;
}

Status WriteAndWait(Connection* link, const MemoryRegion& local, const RemoteKey& remote,
                    size_t length) {
  std::mutex mutex;
  std::condition_variable changed;
  bool done = false;
  Status result;
  RETURN_IF_ERROR(link->PostWrite(local, 0, remote, 0, length, [&](const Status& status) {
    std::lock_guard<std::mutex> lock(mutex);
    result = status;
    done = true;
    changed.notify_all();
  }));
  std::unique_lock<std::mutex> lock(mutex);
  if (!changed.wait_for(lock, milliseconds(20000), [&] { return done; })) {
    return DeadlineExceededError("WRITE did not complete");
  }
  return result;
}

// A region from AllocateRegistered is a memfd: the peer's first WRITE maps
// it (a second mapping of it in this process, which holds both ranks) and
// copies there instead of through process_vm_writev. Mappings of regions
// the owner destroyed go as new ones come, so a stream of short-lived
// regions does not pile them up in the peer.
TEST(ShmTransportTest, AllocatedRegionsAreMappedByThePeerAndSweptWhenGone) {
  Events events[2];
  auto transports = ConnectShm({Options(0, &events[0]), Options(1, &events[1])}, ShmOptions());
  ASSERT_TRUE(transports.ok()) << transports.status();
  Connection* link = *(*transports)[0]->GetConnection(1);
  std::vector<uint8_t> source(8192);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 13 + 5);
  auto local = (*transports)[0]->RegisterMemory(source.data(), source.size(), kAccessAll);
  ASSERT_TRUE(local.ok());
  const int before = RegisteredMappings();
  auto kept = (*transports)[1]->AllocateRegistered(source.size(), kAccessAll);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(RegisteredMappings(), before + 1);
  ASSERT_TRUE(WriteAndWait(link, **local, (*kept)->remote_key(), source.size()).ok());
  EXPECT_EQ(RegisteredMappings(), before + 2);  // rank 0 mapped it
  EXPECT_TRUE(std::equal(source.begin(), source.end(), (*kept)->data()));
  ASSERT_TRUE(WriteAndWait(link, **local, (*kept)->remote_key(), 64).ok());
  EXPECT_EQ(RegisteredMappings(), before + 2);  // and kept the mapping
  // Twenty regions, each written once and destroyed.
  for (int i = 0; i < 20; ++i) {
    auto brief = (*transports)[1]->AllocateRegistered(4096, kAccessAll);
    ASSERT_TRUE(brief.ok()) << brief.status();
    ASSERT_TRUE(WriteAndWait(link, **local, (*brief)->remote_key(), 4096).ok());
    EXPECT_TRUE(std::equal(source.begin(), source.begin() + 4096, (*brief)->data()));
  }
  // The sweep runs once 8 are mapped: at most 8 besides the kept region's
  // two mappings, not 20.
  EXPECT_LE(RegisteredMappings(), before + 2 + 8);
  EXPECT_TRUE(link->status().ok()) << link->status();
}

// Regions registered inside a block of AllocateShareable (the runtime's
// memory zones, where registers are registered in place) are mapped by the
// peer too, one mapping for the whole memfd however many regions lie in
// it; a region keeps the memfd after its block is gone. Memory outside any
// block keeps cross-memory attach.
TEST(ShmTransportTest, RegionsInsideAShareableBlockShareOneMappingInThePeer) {
  Events events[2];
  auto transports = ConnectShm({Options(0, &events[0]), Options(1, &events[1])}, ShmOptions());
  ASSERT_TRUE(transports.ok()) << transports.status();
  Connection* link = *(*transports)[0]->GetConnection(1);
  std::vector<uint8_t> source(8192);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + 3);
  auto local = (*transports)[0]->RegisterMemory(source.data(), source.size(), kAccessAll);
  ASSERT_TRUE(local.ok());
  const int before = RegisteredMappings();
  auto block = (*transports)[1]->AllocateShareable(65536);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(RegisteredMappings(), before + 1);
  uint8_t* base = (*block)->data();
  auto first = (*transports)[1]->RegisterMemory(base + 4096, 4096, kAccessAll);
  auto second = (*transports)[1]->RegisterMemory(base + 8192, 8192, kAccessAll);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(WriteAndWait(link, **local, (*first)->remote_key(), 4096).ok());
  ASSERT_TRUE(WriteAndWait(link, **local, (*second)->remote_key(), 8192).ok());
  EXPECT_EQ(RegisteredMappings(), before + 2);  // one mapping in rank 0 for both
  EXPECT_TRUE(std::equal(source.begin(), source.begin() + 4096, base + 4096));
  EXPECT_TRUE(std::equal(source.begin(), source.end(), base + 8192));
  EXPECT_TRUE(std::all_of(base, base + 4096, [](uint8_t b) { return b == 0; }));
  // The block goes first; the regions still hold its memfd.
  block->reset();
  std::vector<uint8_t> other(4096, 0x5a);
  auto other_region = (*transports)[0]->RegisterMemory(other.data(), other.size(), kAccessAll);
  ASSERT_TRUE(other_region.ok());
  ASSERT_TRUE(WriteAndWait(link, **other_region, (*first)->remote_key(), 4096).ok());
  EXPECT_TRUE(std::all_of((*first)->data(), (*first)->data() + 4096,
                          [](uint8_t b) { return b == 0x5a; }));
  // Ordinary memory: no new mapping anywhere.
  std::vector<uint8_t> plain(4096, 0);
  auto plain_region = (*transports)[1]->RegisterMemory(plain.data(), plain.size(), kAccessAll);
  ASSERT_TRUE(plain_region.ok());
  ASSERT_TRUE(WriteAndWait(link, **local, (*plain_region)->remote_key(), 4096).ok());
  EXPECT_TRUE(std::equal(source.begin(), source.begin() + 4096, plain.begin()));
  EXPECT_EQ(RegisteredMappings(), before + 2);
  EXPECT_TRUE(link->status().ok()) << link->status();
}

// A message's bytes go into the buffer freed last (shm_segment.h): one
// message at a time lands at one address over and over (a cache-resident
// buffer), while messages in flight together each get a buffer of their
// own, bytes intact.
TEST(ShmTransportTest, ConsumedBuffersAreReusedMostRecentFirst) {
  Events events[2];
  struct Arrivals {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::pair<const void*, std::string>> seen;
    bool hold = false;  // the handler waits while set
  } arrivals;
  TransportOptions options1 = Options(1, &events[1]);
  options1.on_message = [&arrivals](int, const void* data, size_t size) {
    std::unique_lock<std::mutex> lock(arrivals.mutex);
    arrivals.seen.push_back({data, std::string(static_cast<const char*>(data), size)});
    arrivals.changed.notify_all();
    arrivals.changed.wait_for(lock, milliseconds(20000), [&] { return !arrivals.hold; });
  };
  auto transports = ConnectShm({Options(0, &events[0]), options1}, ShmOptions());
  ASSERT_TRUE(transports.ok()) << transports.status();
  Connection* link = *(*transports)[0]->GetConnection(1);
  // One at a time: each consumed (Flush) before the next goes out.
  for (int i = 0; i < 8; ++i) {
    const std::string message = "one " + std::to_string(i);
    ASSERT_TRUE(link->SendMessage(message.data(), message.size()).ok());
    ASSERT_TRUE(link->Flush(DeadlineAfter(milliseconds(20000))).ok());
  }
  // Four in flight (the ring's 4 credits): the handler holds the first
  // while the other three land.
  {
    std::lock_guard<std::mutex> lock(arrivals.mutex);
    arrivals.hold = true;
  }
  for (int i = 0; i < 4; ++i) {
    const std::string message = "four " + std::to_string(i);
    ASSERT_TRUE(link->SendMessage(message.data(), message.size()).ok());
  }
  {
    std::unique_lock<std::mutex> lock(arrivals.mutex);
    ASSERT_TRUE(arrivals.changed.wait_for(lock, milliseconds(20000),
                                          [&] { return arrivals.seen.size() == 9; }));
    arrivals.hold = false;
  }
  arrivals.changed.notify_all();
  ASSERT_TRUE(link->Flush(DeadlineAfter(milliseconds(20000))).ok());
  std::lock_guard<std::mutex> lock(arrivals.mutex);
  ASSERT_EQ(arrivals.seen.size(), 12u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(arrivals.seen[i].second, "one " + std::to_string(i));
    EXPECT_EQ(arrivals.seen[i].first, arrivals.seen[0].first) << "message " << i;
  }
  std::vector<const void*> burst;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(arrivals.seen[8 + i].second, "four " + std::to_string(i));
    burst.push_back(arrivals.seen[8 + i].first);
  }
  // The first of the burst reuses the buffer of the stream before it.
  EXPECT_EQ(burst[0], arrivals.seen[0].first);
  std::sort(burst.begin(), burst.end());
  EXPECT_EQ(std::unique(burst.begin(), burst.end()), burst.end()) << "two in one buffer";
}

// Above kHotSlotMaxBytes a message takes the buffer free the longest: one
// large message at a time goes round all the slots in order, as in a plain
// ring, while a small one between them still reuses the buffer freed last.
TEST(ShmTransportTest, LargeMessagesTakeTheLongestFreeBuffer) {
  Events events[2];
  std::mutex mutex;
  std::vector<std::pair<const void*, size_t>> seen;
  TransportOptions options0 = Options(0, &events[0]);
  TransportOptions options1 = Options(1, &events[1]);
  for (TransportOptions* options : {&options0, &options1}) {
    options->message_slot_size = kHotSlotMaxBytes * 2;
  }
  options1.on_message = [&](int, const void* data, size_t size) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    // Every byte is the message's size mod 251: intact.
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], size % 251) << "byte " << i;
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back({data, size});
  };
  auto transports = ConnectShm({options0, options1}, ShmOptions());
  ASSERT_TRUE(transports.ok()) << transports.status();
  Connection* link = *(*transports)[0]->GetConnection(1);
  auto send = [&](size_t size) {
    const std::string message(size, static_cast<char>(size % 251));
    ASSERT_TRUE(link->SendMessage(message.data(), message.size()).ok());
    ASSERT_TRUE(link->Flush(DeadlineAfter(milliseconds(20000))).ok());
  };
  const size_t large = kHotSlotMaxBytes + 1, small = 100;
  for (int i = 0; i < 8; ++i) send(large);  // every slot in turn, twice
  send(small);                              // the buffer freed last: the 8th's
  send(small);
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(seen.size(), 10u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(seen[i + 4].first, seen[i].first) << "message " << i + 4;
    for (int j = 0; j < i; ++j) EXPECT_NE(seen[i].first, seen[j].first) << i << " and " << j;
  }
  EXPECT_EQ(seen[8].first, seen[7].first);
  EXPECT_EQ(seen[9].first, seen[7].first);
}

}  // namespace
}  // namespace shm
}  // namespace comm
}  // namespace oflite
