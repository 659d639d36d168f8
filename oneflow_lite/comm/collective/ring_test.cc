#include "oneflow_lite/comm/collective/ring.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/memory/bounce_buffers.h"  // kReplyBit
#include "oneflow_lite/comm/shm/shm_transport.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"
#include "oneflow_lite/comm/testing/transport_conformance.h"

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportConformanceTest);

namespace oflite {
namespace comm {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kTimeout{20000};

TransportFactory TcpFactory() {
  return {"tcp", [](const TransportOptions& options) {
            return tcp::CreateTcpTransport(options, tcp::TcpOptions());
          }};
}

// shm with caller progress: waiters that poll run WRITEs, completions and
// READYs on their own threads.
TransportFactory ShmPollingFactory() {
  return {"shm_poll", [](const TransportOptions& options) -> StatusOr<std::unique_ptr<Transport>> {
            shm::ShmOptions shm_options;
            shm_options.caller_progress = true;
            ASSIGN_OR_RETURN(auto transport, shm::CreateShmTransport(options, shm_options));
            return std::unique_ptr<Transport>(std::move(transport));
          }};
}

// tcp with caller progress: polling waiters read the sockets themselves.
TransportFactory TcpPollingFactory() {
  return {"tcp_poll", [](const TransportOptions& options) {
            tcp::TcpOptions tcp_options;
            tcp_options.caller_progress = true;
            return tcp::CreateTcpTransport(options, tcp_options);
          }};
}

// A real transport seen through a wrapper that can (a) hide that its
// connections order a message after an outstanding WRITE, so the ring takes
// the path every provider supports (READY after the WRITE's completion), and
// (b) hold back WRITE completions until Release(), as a slow acknowledgement
// on a loaded link would. Everything else passes straight through.
class WrappedTransport : public Transport {
 public:
  WrappedTransport(std::unique_ptr<Transport> inner, bool hide_ordering)
      : inner_(std::move(inner)), hide_ordering_(hide_ordering) {}
  ~WrappedTransport() override {
    Release();
    inner_.reset();  // its cancelled completions still find this object whole
  }

  void HoldWriteCompletions() {
    std::lock_guard<std::mutex> lock(mutex_);
    holding_ = true;
  }
  // Runs the held completions (on this thread) and stops holding.
  void Release() {
    std::vector<std::pair<Completion, Status>> held;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      holding_ = false;
      held.swap(held_);
    }
    for (auto& [done, status] : held) done(status);
  }
  // WRITEs posted so far whose completion is held.
  size_t held_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_.size();
  }

  const char* provider_name() const override { return inner_->provider_name(); }
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* data, size_t size,
                                                         uint32_t access) override {
    return inner_->RegisterMemory(data, size, access);
  }
  StatusOr<std::string> LocalEndpoint(int peer) override { return inner_->LocalEndpoint(peer); }
  Status Connect(int peer, const std::string& endpoint, Deadline deadline) override {
    return inner_->Connect(peer, endpoint, deadline);
  }
  StatusOr<Connection*> GetConnection(int peer) override {
    ASSIGN_OR_RETURN(Connection * connection, inner_->GetConnection(peer));
    std::lock_guard<std::mutex> lock(mutex_);
    auto& wrapped = connections_[peer];
    if (!wrapped) wrapped = std::make_unique<WrappedConnection>(this, connection);
    return wrapped.get();
  }

 private:
  class WrappedConnection : public Connection {
   public:
    WrappedConnection(WrappedTransport* owner, Connection* inner)
        : owner_(owner), inner_(inner) {}
    int peer_rank() const override { return inner_->peer_rank(); }
    Status PostRead(const MemoryRegion& local, size_t local_offset, const RemoteKey& remote,
                    size_t remote_offset, size_t length, Completion done) override {
      return inner_->PostRead(local, local_offset, remote, remote_offset, length,
                              std::move(done));
    }
    Status PostWrite(const MemoryRegion& local, size_t local_offset, const RemoteKey& remote,
                     size_t remote_offset, size_t length, Completion done) override {
      return inner_->PostWrite(local, local_offset, remote, remote_offset, length,
                               [owner = owner_, done](const Status& status) {
                                 owner->Complete(done, status);
                               });
    }
    Status SendMessage(const void* data, size_t size) override {
      return inner_->SendMessage(data, size);
    }
    size_t max_message_size() const override { return inner_->max_message_size(); }
    bool OrdersMessagesAfterWrites() const override {
      return !owner_->hide_ordering_ && inner_->OrdersMessagesAfterWrites();
    }
    Status status() const override { return inner_->status(); }
    Status Flush(Deadline deadline) override { return inner_->Flush(deadline); }

   private:
    WrappedTransport* const owner_;
    Connection* const inner_;
  };

  void Complete(const Completion& done, const Status& status) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (holding_) {
        held_.emplace_back(done, status);
        return;
      }
    }
    done(status);
  }

  std::unique_ptr<Transport> inner_;
  const bool hide_ordering_;
  std::mutex mutex_;
  bool holding_ = false;
  std::vector<std::pair<Completion, Status>> held_;
  std::map<int, std::unique_ptr<WrappedConnection>> connections_;
};

// N ranks in one process, each with a router, pool and communicator.
struct Ring {
  std::vector<std::unique_ptr<MessageRouter>> routers;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<CommStats> stats;
  std::vector<std::unique_ptr<RegisteredPool>> pools;
  std::vector<std::unique_ptr<RingCommunicator>> communicators;

  ~Ring() {
    communicators.clear();
    pools.clear();
    transports.clear();
  }
};

// How the ring's transports are seen (WrappedTransport).
enum class Wrap { kNone, kReadyAfterCompletion, kHoldable };

// N connected transports with routers and pools, no communicators yet.
std::unique_ptr<Ring> MakeTransports(int world, Wrap wrap = Wrap::kNone,
                                     const TransportFactory& factory = TcpFactory()) {
  auto ring = std::make_unique<Ring>();
  ring->stats = std::vector<CommStats>(world);
  std::vector<TransportOptions> options(world);
  for (int rank = 0; rank < world; ++rank) {
    ring->routers.push_back(std::make_unique<MessageRouter>());
    options[rank].rank = rank;
    options[rank].world_size = world;
    options[rank].on_message = ring->routers[rank]->AsHandler();
  }
  auto transports = CreateConnectedTransports(factory, options, kTimeout);
  CHECK(transports.ok()) << transports.status();
  ring->transports = std::move(*transports);
  if (wrap != Wrap::kNone) {
    for (auto& transport : ring->transports) {
      transport = std::make_unique<WrappedTransport>(std::move(transport),
                                                     wrap == Wrap::kReadyAfterCompletion);
    }
  }
  ring->communicators.resize(world);
  for (int rank = 0; rank < world; ++rank) {
    RegisteredPoolOptions pool_options;
    pool_options.block_size = 1 << 20;
    ring->pools.push_back(std::move(*RegisteredPool::Create(
        ring->transports[rank].get(), pool_options, &ring->stats[rank].pool)));
  }
  return ring;
}

std::unique_ptr<Ring> MakeRing(int world, size_t chunk_bytes = 4096, int slots = 2,
                               Wrap wrap = Wrap::kNone,
                               const TransportFactory& factory = TcpFactory(),
                               bool wait_poll = false) {
  auto ring = MakeTransports(world, wrap, factory);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      CollectiveOptions collective;
      collective.chunk_bytes = chunk_bytes;
      collective.slots = slots;
      collective.wait_poll = wait_poll;
      auto communicator = RingCommunicator::Create(
          ring->transports[rank].get(), ring->routers[rank].get(),
          ring->pools[rank].get(), collective);
      CHECK(communicator.ok()) << communicator.status();
      ring->communicators[rank] = std::move(*communicator);
    });
  }
  for (auto& thread : threads) thread.join();
  return ring;
}

enum class Kind { kAllReduce, kReduceScatter, kAllGather };

// Runs one collective on every rank over int64 data: rank r element i holds
// (r + 1) * 1000 + i, so sums are exact.
void RunAndCheck(Ring* ring, Kind kind, size_t count) {
  SCOPED_TRACE("kind " + std::to_string(static_cast<int>(kind)));
  const int world = static_cast<int>(ring->transports.size());
  std::vector<std::vector<int64_t>> data(world, std::vector<int64_t>(count));
  std::vector<Status> results(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    for (size_t i = 0; i < count; ++i) data[rank][i] = (rank + 1) * 1000 + i;
    threads.emplace_back([&, rank] {
      auto region = ring->transports[rank]->RegisterMemory(
          data[rank].data(), count * sizeof(int64_t), kAccessAll);
      RingCommunicator* communicator = ring->communicators[rank].get();
      const Deadline deadline = DeadlineAfter(kTimeout);
      switch (kind) {
        case Kind::kAllReduce:
          results[rank] = communicator->AllReduce(**region, 0, count, DT_INT64, deadline);
          break;
        case Kind::kReduceScatter:
          results[rank] = communicator->ReduceScatter(**region, 0, count, DT_INT64, deadline);
          break;
        case Kind::kAllGather:
          results[rank] = communicator->AllGather(**region, 0, count, DT_INT64, deadline);
          break;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const int64_t rank_sum = world * (world + 1) / 2;
  for (int rank = 0; rank < world; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank];
    for (size_t i = 0; i < count; ++i) {
      int owner = 0;
      while (owner + 1 < world) {
        size_t begin, end;
        RingCommunicator::SegmentBounds(count, world, owner, &begin, &end);
        if (i < end) break;
        ++owner;
      }
      int64_t expected;
      if (kind == Kind::kAllReduce) {
        expected = rank_sum * 1000 + world * static_cast<int64_t>(i);
      } else if (kind == Kind::kReduceScatter) {
        if (owner != rank) continue;  // other segments hold partial sums
        expected = rank_sum * 1000 + world * static_cast<int64_t>(i);
      } else {
        expected = (owner + 1) * 1000 + static_cast<int64_t>(i);
      }
      ASSERT_EQ(data[rank][i], expected)
          << "rank " << rank << " element " << i << " of " << count;
    }
  }
}

TEST(RingTest, AllReduceOverWorldsAndSizes) {
  for (int world : {1, 2, 3, 4}) {
    auto ring = MakeRing(world);
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1001}, size_t{40000}}) {
      SCOPED_TRACE("world " + std::to_string(world) + " count " + std::to_string(count));
      RunAndCheck(ring.get(), Kind::kAllReduce, count);
    }
  }
}

// The ring of `options.members` on each of them (created at once: each
// waits for its neighbour's key), indexed by rank; null for the others.
std::vector<std::unique_ptr<RingCommunicator>> CreateGroupRing(Ring* ring,
                                                               const CollectiveOptions& options) {
  std::vector<std::unique_ptr<RingCommunicator>> mine(ring->transports.size());
  std::vector<std::thread> setup;
  for (int rank : options.members) {
    setup.emplace_back([&, rank] {
      auto created = RingCommunicator::Create(ring->transports[rank].get(),
                                              ring->routers[rank].get(),
                                              ring->pools[rank].get(), options);
      CHECK(created.ok()) << created.status();
      mine[rank] = std::move(*created);
    });
  }
  for (auto& thread : setup) thread.join();
  return mine;
}

// Rings over groups of a 4-rank job (CollectiveOptions::members), as the
// axes of a 2-D placement use them: {2, 0} and {1, 3} at once on two
// channels, and {3, 1, 0} (not in rank order). Each member gets its group's
// sum; a reduce-scatter leaves segment k on the group's k-th member; a
// rank in no group is untouched.
TEST(RingTest, GroupsOfTheJobRunTheirOwnRings) {
  auto ring = MakeTransports(4);
  // Each set of groups has channels of its own: a ring's last ACK may still
  // be in flight when its collective returns (it only frees a slot), and a
  // later ring on the same channel would take it for its own.
  uint32_t next_channel = 0x400;
  for (const std::vector<std::vector<int>>& groups :
       {std::vector<std::vector<int>>{{2, 0}, {1, 3}}, std::vector<std::vector<int>>{{3, 1, 0}}}) {
    const uint32_t first_channel = next_channel;
    next_channel += 2 * static_cast<uint32_t>(groups.size());
    std::vector<std::unique_ptr<RingCommunicator>> mine(4);
    std::vector<const std::vector<int>*> group_of(4, nullptr);
    for (size_t g = 0; g < groups.size(); ++g) {
      CollectiveOptions options;
      options.chunk_bytes = 4096;
      options.slots = 2;
      options.channel = first_channel + 2 * static_cast<uint32_t>(g);
      options.tag = options.channel;
      options.members = groups[g];
      auto created = CreateGroupRing(ring.get(), options);
      for (int rank : groups[g]) {
        group_of[rank] = &groups[g];
        mine[rank] = std::move(created[rank]);
      }
    }
    for (Kind kind : {Kind::kAllReduce, Kind::kReduceScatter}) {
      const size_t count = 20011;  // several chunks per segment
      std::vector<std::vector<int64_t>> data(4, std::vector<int64_t>(count));
      std::vector<Status> results(4);
      std::vector<std::thread> threads;
      for (int rank = 0; rank < 4; ++rank) {
        for (size_t i = 0; i < count; ++i) data[rank][i] = (rank + 1) * 1000 + i;
        if (mine[rank] == nullptr) continue;
        threads.emplace_back([&, rank] {
          auto region = ring->transports[rank]->RegisterMemory(
              data[rank].data(), count * sizeof(int64_t), kAccessAll);
          const Deadline deadline = DeadlineAfter(kTimeout);
          results[rank] = kind == Kind::kAllReduce
                              ? mine[rank]->AllReduce(**region, 0, count, DT_INT64, deadline)
                              : mine[rank]->ReduceScatter(**region, 0, count, DT_INT64, deadline);
        });
      }
      for (auto& thread : threads) thread.join();
      for (int rank = 0; rank < 4; ++rank) {
        ASSERT_TRUE(results[rank].ok()) << "rank " << rank << ": " << results[rank];
        if (group_of[rank] == nullptr) {
          EXPECT_EQ(data[rank][count - 1], (rank + 1) * 1000 + int64_t{count - 1});
          continue;
        }
        const std::vector<int>& members = *group_of[rank];
        const int n = static_cast<int>(members.size());
        const int me = static_cast<int>(std::find(members.begin(), members.end(), rank) -
                                        members.begin());
        int64_t rank_sum = 0;
        for (int member : members) rank_sum += member + 1;
        size_t begin = 0, end = count;
        if (kind == Kind::kReduceScatter) RingCommunicator::SegmentBounds(count, n, me, &begin, &end);
        for (size_t i = begin; i < end; ++i) {
          ASSERT_EQ(data[rank][i], rank_sum * 1000 + n * static_cast<int64_t>(i))
              << "rank " << rank << " element " << i << " kind " << static_cast<int>(kind);
        }
      }
    }
  }
  CollectiveOptions outside;
  outside.members = {1, 2};
  auto refused = RingCommunicator::Create(ring->transports[0].get(), ring->routers[0].get(),
                                          ring->pools[0].get(), outside);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("rank 0 is not in its group"), std::string::npos)
      << refused.status();
}

// The path of providers that do not order a message after an outstanding
// WRITE (shm): READY after the completion.
TEST(RingTest, ReadyAfterCompletionPathGivesTheSameResults) {
  for (int world : {2, 3, 4}) {
    auto ring = MakeRing(world, 4096, 2, Wrap::kReadyAfterCompletion);
    for (size_t count : {size_t{1}, size_t{1001}, size_t{40000}}) {
      SCOPED_TRACE("world " + std::to_string(world) + " count " + std::to_string(count));
      RunAndCheck(ring.get(), Kind::kAllReduce, count);
      RunAndCheck(ring.get(), Kind::kReduceScatter, count);
      RunAndCheck(ring.get(), Kind::kAllGather, count);
    }
  }
}

// Waiters that drive the transport (CollectiveOptions::wait_poll over shm
// and tcp with caller progress): READY handlers, WRITEs and their
// completions run on the polling callers as well as on the progress
// threads; the results are the same. Small chunks and slots: many waits per
// call.
TEST(RingTest, PollingWaitersGiveTheSameResults) {
  for (const TransportFactory& factory : {ShmPollingFactory(), TcpPollingFactory()}) {
    for (int world : {2, 3, 4}) {
      auto ring = MakeRing(world, 4096, 2, Wrap::kNone, factory, /*wait_poll=*/true);
      for (size_t count : {size_t{1}, size_t{1001}, size_t{40000}}) {
        SCOPED_TRACE(factory.name + " world " + std::to_string(world) + " count " +
                     std::to_string(count));
        RunAndCheck(ring.get(), Kind::kAllReduce, count);
        RunAndCheck(ring.get(), Kind::kReduceScatter, count);
        RunAndCheck(ring.get(), Kind::kAllGather, count);
      }
    }
  }
}

// WRITEs rank `rank` posts in an all-reduce of `count` int64 in chunks of
// `chunk_bytes`: one per chunk of every send segment of its schedule.
size_t WritesPosted(size_t count, int rank, int world, size_t chunk_bytes) {
  size_t writes = 0;
  for (const RingStep& step : RingSchedule(RingCollective::kAllReduce, rank, world)) {
    size_t begin, end;
    RingCommunicator::SegmentBounds(count, world, step.send_segment, &begin, &end);
    writes += ((end - begin) * sizeof(int64_t) + chunk_bytes - 1) / chunk_bytes;
  }
  return writes;
}

// Over tcp, which orders a message after an outstanding WRITE, READY leaves
// with the data: the whole all-reduce moves (every rank posts every one of
// its WRITEs, which needs every READY from its left) while no WRITE
// completion has come back. The link then never idles for a completion's
// round trip behind the peer's own data (docs/comm.md, "Ring collectives").
TEST(RingTest, ReadyTravelsWithTheDataWithoutWaitingForCompletions) {
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    const size_t chunk_bytes = 4096, count = 9000;
    auto ring = MakeRing(world, chunk_bytes, 2, Wrap::kHoldable);
    std::vector<WrappedTransport*> wrapped;
    for (auto& transport : ring->transports) {
      wrapped.push_back(static_cast<WrappedTransport*>(transport.get()));
      wrapped.back()->HoldWriteCompletions();
    }
    // Releases the completions once every rank has posted all its WRITEs
    // (or after a bound, so that a failure ends instead of hanging).
    bool all_posted = false;
    std::thread releaser([&] {
      const Deadline deadline = DeadlineAfter(kTimeout);
      while (!all_posted && Clock::now() < deadline) {
        all_posted = true;
        for (int rank = 0; rank < world; ++rank) {
          all_posted &= wrapped[rank]->held_count() ==
                        WritesPosted(count, rank, world, chunk_bytes);
        }
        std::this_thread::sleep_for(milliseconds(2));
      }
      for (WrappedTransport* transport : wrapped) transport->Release();
    });
    RunAndCheck(ring.get(), Kind::kAllReduce, count);
    releaser.join();
    EXPECT_TRUE(all_posted) << "the ring waited for WRITE completions before announcing data";
  }
}

TEST(RingTest, ReduceScatterAndAllGatherPlaceSegmentsByRank) {
  for (int world : {2, 3, 4}) {
    auto ring = MakeRing(world);
    for (size_t count : {size_t{1}, size_t{7}, size_t{5003}}) {
      SCOPED_TRACE("world " + std::to_string(world) + " count " + std::to_string(count));
      RunAndCheck(ring.get(), Kind::kReduceScatter, count);
      RunAndCheck(ring.get(), Kind::kAllGather, count);
    }
  }
}

TEST(RingTest, FloatAllReduceMatchesSerialSum) {
  auto ring = MakeRing(3, 1024, 1);
  const size_t count = 777;
  std::vector<std::vector<float>> data(3, std::vector<float>(count));
  std::vector<float> expected(count, 0.0f);
  for (int rank = 0; rank < 3; ++rank) {
    for (size_t i = 0; i < count; ++i) {
      data[rank][i] = 0.25f * rank + 0.5f * i;  // exactly representable sums
      expected[i] += data[rank][i];
    }
  }
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      auto region = ring->transports[rank]->RegisterMemory(data[rank].data(),
                                                           count * 4, kAccessAll);
      ASSERT_TRUE(ring->communicators[rank]->AllReduce(**region, 0, count, DT_FLOAT,
                                                       DeadlineAfter(kTimeout)).ok());
    });
  }
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(data[rank], expected);
}

TEST(RingTest, BadArgumentsAreRejectedWithoutBreakingTheRing) {
  auto ring = MakeRing(2);
  std::vector<int64_t> small(4);
  auto region = ring->transports[0]->RegisterMemory(small.data(), 32, kAccessAll);
  EXPECT_EQ(ring->communicators[0]->AllReduce(**region, 0, 5, DT_INT64,
                                              DeadlineAfter(kTimeout)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ring->communicators[0]->AllReduce(**region, 0, 4, DT_BOOL,
                                              DeadlineAfter(kTimeout)).code(),
            StatusCode::kInvalidArgument);
  region->reset();
  RunAndCheck(ring.get(), Kind::kAllReduce, 100);
}

TEST(RingTest, LostNeighbourFailsTheCollectiveNamingIt) {
  auto ring = MakeRing(3);
  ring->communicators[2].reset();
  ring->transports[2].reset();  // rank 2 is gone
  std::vector<int64_t> data(1000, 1);
  auto region = ring->transports[0]->RegisterMemory(data.data(), 8000, kAccessAll);
  auto start = Clock::now();
  Status status = ring->communicators[0]->AllReduce(**region, 0, 1000, DT_INT64,
                                                    DeadlineAfter(kTimeout));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("rank 2"), std::string::npos) << status;
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  // Sticky afterwards.
  EXPECT_FALSE(ring->communicators[0]->AllReduce(**region, 0, 1000, DT_INT64,
                                                 DeadlineAfter(kTimeout)).ok());
  region->reset();
}

// Creates communicators on `ranks` concurrently (the others never take part)
// and returns each Create's status.
std::vector<Status> CreateOn(Ring* ring, const std::vector<int>& ranks,
                             const std::vector<CollectiveOptions>& options) {
  std::vector<Status> results(ring->transports.size());
  std::vector<std::thread> threads;
  for (int rank : ranks) {
    threads.emplace_back([&, rank] {
      auto communicator = RingCommunicator::Create(
          ring->transports[rank].get(), ring->routers[rank].get(), ring->pools[rank].get(),
          options[rank]);
      results[rank] = communicator.status();
      if (communicator.ok()) ring->communicators[rank] = std::move(*communicator);
    });
  }
  for (auto& thread : threads) thread.join();
  return results;
}

// Rank 2 never enters the all-reduce (its runtime failed before); ranks 0
// and 1 wait on it until their cancel flag is set, then return its reason
// within the poll bound instead of at the 120 s deadline, and stay failed.
TEST(RingTest, CancelStopsACollectiveInFlightPromptly) {
  auto ring = MakeTransports(3);
  CancelFlag flags[3];
  std::vector<CollectiveOptions> options(3);
  for (int rank = 0; rank < 3; ++rank) options[rank].cancel = &flags[rank];
  for (const Status& status : CreateOn(ring.get(), {0, 1, 2}, options)) {
    ASSERT_TRUE(status.ok()) << status;
  }
  std::vector<std::vector<int64_t>> data(2, std::vector<int64_t>(3001, 1));
  std::vector<Status> results(2);
  std::vector<Clock::time_point> returned(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto region = ring->transports[rank]->RegisterMemory(data[rank].data(), 3001 * 8,
                                                           kAccessAll);
      ASSERT_TRUE(region.ok());
      results[rank] = ring->communicators[rank]->AllReduce(
          **region, 0, 3001, DT_INT64, DeadlineAfter(std::chrono::seconds(120)));
      returned[rank] = Clock::now();
      auto again = ring->communicators[rank]->AllReduce(**region, 0, 3001, DT_INT64,
                                                        DeadlineAfter(kTimeout));
      EXPECT_EQ(again.code(), StatusCode::kAborted) << "rank " << rank << ": " << again;
    });
  }
  std::this_thread::sleep_for(milliseconds(300));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_FALSE(flags[rank].cancelled());
    EXPECT_TRUE(flags[rank].Cancel(AbortedError("rank 2 failed: injected")));
    EXPECT_FALSE(flags[rank].Cancel(InternalError("second reason is ignored")));
  }
  const Clock::time_point cancelled = Clock::now();
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(results[rank].code(), StatusCode::kAborted) << results[rank];
    EXPECT_NE(results[rank].message().find("rank 2 failed: injected"), std::string::npos)
        << results[rank];
    EXPECT_LT(returned[rank] - cancelled, milliseconds(2000)) << "rank " << rank;
  }
}

// A set-up waiting for a neighbour that never creates its communicator ends
// at the cancel, not at the 30 s set-up timeout.
TEST(RingTest, CancelStopsASetupWaitingForANeighbour) {
  auto ring = MakeTransports(2);
  CancelFlag flag;
  std::vector<CollectiveOptions> options(2);
  options[0].cancel = &flag;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(200));
    flag.Cancel(CancelledError("runtime aborted"));
  });
  const Clock::time_point start = Clock::now();
  std::vector<Status> results = CreateOn(ring.get(), {0}, options);
  canceller.join();
  EXPECT_EQ(results[0].code(), StatusCode::kCancelled) << results[0];
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
}

// Two rings given the same channel with different tags: the set-up sees the
// neighbour's tag and refuses, naming the rank.
TEST(RingTest, NeighbourWithAnotherRingTagIsRefused) {
  auto ring = MakeTransports(2);
  std::vector<CollectiveOptions> options(2);
  options[0].tag = 7;
  options[1].tag = 8;
  options[0].setup_timeout = options[1].setup_timeout = milliseconds(5000);
  std::vector<Status> results = CreateOn(ring.get(), {0, 1}, options);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(results[rank].code(), StatusCode::kDataLoss) << results[rank];
    EXPECT_NE(results[rank].message().find("rank " + std::to_string(1 - rank) + " runs ring"),
              std::string::npos)
        << results[rank];
  }
}

// A message on a ring's channel from a rank that is not the neighbour who
// sends it (a stale ring's last ACK, a plan that numbered channels apart)
// fails the ring naming the sender, not its neighbour.
TEST(RingTest, MessageFromARankOutsideTheRingIsRefusedNamingIt) {
  auto ring = MakeTransports(4);
  CollectiveOptions options;
  options.channel = 0x500;
  options.tag = 0x500;
  options.members = {0, 1, 2};
  std::vector<std::unique_ptr<RingCommunicator>> mine = CreateGroupRing(ring.get(), options);
  auto to_zero = ring->transports[3]->GetConnection(0);
  ASSERT_TRUE(to_zero.ok()) << to_zero.status();
  const std::string ack = {4, 1, 0, 0, 0};  // an ACK of one slot (ring.cc's kAck)
  ASSERT_TRUE(MessageRouter::Send(*to_zero, 0x500 | kReplyBit, ack).ok());
  std::vector<int64_t> data(1000, 1);
  auto region = ring->transports[0]->RegisterMemory(data.data(), data.size() * sizeof(int64_t),
                                                    kAccessAll);
  ASSERT_TRUE(region.ok());
  // Rank 0 waits for its left neighbour's READY, which never comes (ranks
  // 1 and 2 are not in a call): only the foreign message can end the wait
  // before the deadline.
  const Status result = mine[0]->AllReduce(**region, 0, data.size(), DT_INT64,
                                           DeadlineAfter(kTimeout));
  EXPECT_EQ(result.code(), StatusCode::kDataLoss) << result;
  EXPECT_NE(result.message().find("from rank 3, which is not this ring's neighbour (rank 1)"),
            std::string::npos)
      << result;
}

}  // namespace
}  // namespace comm
}  // namespace oflite

namespace oflite {
namespace comm {
namespace {

// The one ring schedule: at every step what rank r sends is what its right
// neighbour receives, and each phase visits every segment but one per rank.
TEST(RingScheduleTest, NeighboursAgreeStepByStep) {
  for (RingCollective collective : {RingCollective::kAllReduce,
                                    RingCollective::kReduceScatter,
                                    RingCollective::kAllGather}) {
    for (int world : {1, 2, 3, 4}) {
      const size_t phases = collective == RingCollective::kAllReduce ? 2 : 1;
      for (int rank = 0; rank < world; ++rank) {
        const std::vector<RingStep> mine = RingSchedule(collective, rank, world);
        const std::vector<RingStep> right = RingSchedule(collective, (rank + 1) % world, world);
        ASSERT_EQ(mine.size(), phases * (world - 1));
        for (size_t k = 0; k < mine.size(); ++k) {
          EXPECT_EQ(mine[k].send_segment, right[k].receive_segment)
              << "world " << world << " rank " << rank << " step " << k;
          EXPECT_EQ(mine[k].reduce, k < static_cast<size_t>(world - 1) &&
                                        collective != RingCollective::kAllGather);
        }
      }
    }
  }
}

// Byte accounting derives from the schedule: summed over the ranks, each
// phase moves every segment world - 1 times, i.e. (world - 1) * count
// elements; rank 1 of 3 over 7 int64 elements sends exactly its segments.
TEST(RingScheduleTest, BytesSentFollowTheSchedule) {
  for (int world : {1, 2, 3, 4}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) {
      size_t all_reduce = 0, reduce_scatter = 0, all_gather = 0;
      for (int rank = 0; rank < world; ++rank) {
        all_reduce += RingBytesSent(RingCollective::kAllReduce, count, 8, rank, world);
        reduce_scatter += RingBytesSent(RingCollective::kReduceScatter, count, 8, rank, world);
        all_gather += RingBytesSent(RingCollective::kAllGather, count, 8, rank, world);
      }
      const size_t phase = (world - 1) * count * 8;
      EXPECT_EQ(all_reduce, 2 * phase) << world << " ranks, " << count;
      EXPECT_EQ(reduce_scatter, phase) << world << " ranks, " << count;
      EXPECT_EQ(all_gather, phase) << world << " ranks, " << count;
    }
  }
  // Segments of 7 over 3: [0,2) [2,4) [4,7). Rank 1 reduce-scatters
  // segments 0 then 2 (2 + 3 elements), all-gathers segments 1 then 0, and
  // all-reduces segments 1, 0 (reduce phase) then 2, 1 (gather phase).
  EXPECT_EQ(RingBytesSent(RingCollective::kReduceScatter, 7, 8, 1, 3), 5u * 8);
  EXPECT_EQ(RingBytesSent(RingCollective::kAllGather, 7, 8, 1, 3), 4u * 8);
  EXPECT_EQ(RingBytesSent(RingCollective::kAllReduce, 7, 8, 1, 3), (2u + 2u + 3u + 2u) * 8);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
