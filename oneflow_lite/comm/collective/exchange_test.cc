#include "oneflow_lite/comm/collective/exchange.h"

#include <cstring>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/shm/shm_transport.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"
#include "oneflow_lite/comm/testing/transport_conformance.h"
#include "oneflow_lite/comm/wire.h"

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportConformanceTest);

namespace oflite {
namespace comm {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kTimeout{20000};

// "shm_poll": shm with caller progress, so WaitAll's polls run OnPiece.
TransportFactory Factory(const std::string& name) {
  if (name == "shm" || name == "shm_poll") {
    shm::ShmOptions shm_options;
    shm_options.caller_progress = name == "shm_poll";
    return {name,
            [shm_options](const TransportOptions& options) -> StatusOr<std::unique_ptr<Transport>> {
              ASSIGN_OR_RETURN(auto transport, shm::CreateShmTransport(options, shm_options));
              return std::unique_ptr<Transport>(std::move(transport));
            }};
  }
  tcp::TcpOptions tcp_options;
  tcp_options.caller_progress = name == "tcp_poll";  // WaitAll's polls read the sockets
  return {name, [tcp_options](const TransportOptions& options) {
            return tcp::CreateTcpTransport(options, tcp_options);
          }};
}

// N connected ranks in one process, each with a router and a communicator.
struct World {
  std::vector<std::unique_ptr<MessageRouter>> routers;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<ExchangeCommunicator>> exchanges;
  ~World() {
    exchanges.clear();
    transports.clear();
  }
};

std::unique_ptr<World> MakeWorld(const std::string& provider, int world,
                                 const std::vector<uint64_t>& tags = {},
                                 ExchangeSchedule schedule = ExchangeSchedule::kDirect) {
  auto result = std::make_unique<World>();
  std::vector<TransportOptions> options(world);
  for (int rank = 0; rank < world; ++rank) {
    result->routers.push_back(std::make_unique<MessageRouter>());
    options[rank].rank = rank;
    options[rank].world_size = world;
    options[rank].on_message = result->routers[rank]->AsHandler();
  }
  auto transports = CreateConnectedTransports(Factory(provider), options, kTimeout);
  CHECK(transports.ok()) << transports.status();
  result->transports = std::move(*transports);
  for (int rank = 0; rank < world; ++rank) {
    ExchangeOptions exchange;
    exchange.tag = tags.empty() ? 7 : tags[rank];
    exchange.schedule = schedule;
    auto created = ExchangeCommunicator::Create(result->transports[rank].get(),
                                                result->routers[rank].get(), exchange);
    CHECK(created.ok()) << created.status();
    result->exchanges.push_back(std::move(*created));
  }
  return result;
}

// Runs `body(rank)` on one thread per rank; returns each rank's status.
template <typename Body>
std::vector<Status> OnEveryRank(int world, Body body) {
  std::vector<Status> results(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] { results[rank] = body(rank); });
  }
  for (auto& thread : threads) thread.join();
  return results;
}

class ExchangeTest : public ::testing::TestWithParam<std::string> {};

// Sizes around the piece boundary (one message holds a bit under 4 KiB),
// 1 element (fewer than ranks: empty segments), odd counts, many pieces per
// segment; 2, 3 and 4 ranks on every schedule (recursive doubling on
// powers of 2 only); every rank gets the exact sum (integers) and
// bit-identical floats: summed in rank order directly and by
// scatter-gather (per segment), (b0 + b1) + (b2 + b3) by recursive
// doubling at 4 ranks.
TEST_P(ExchangeTest, SumsEqualTheReferenceOnEveryRank) {
  for (ExchangeSchedule schedule : {ExchangeSchedule::kDirect, ExchangeSchedule::kDoubling,
                                    ExchangeSchedule::kScatterGather}) {
    for (int world : {2, 3, 4}) {
      if (schedule == ExchangeSchedule::kDoubling && world == 3) continue;
      auto ranks = MakeWorld(GetParam(), world, {}, schedule);
      const bool pairs = schedule == ExchangeSchedule::kDoubling && world == 4;
      for (size_t count : {size_t{1}, size_t{3}, size_t{7}, size_t{1000}, size_t{1017},
                           size_t{5000}, size_t{30011}}) {
        std::vector<std::vector<int64_t>> ints(world, std::vector<int64_t>(count));
        std::vector<std::vector<float>> floats(world, std::vector<float>(count));
        std::vector<int64_t> int_sum(count, 0);
        std::vector<float> float_sum(count, 0.f);
        for (int rank = 0; rank < world; ++rank) {
          for (size_t i = 0; i < count; ++i) {
            ints[rank][i] = static_cast<int64_t>(i * 31 + rank * 1000003) - 17;
            floats[rank][i] = 0.1f * static_cast<float>(i % 97) + 1.0f / (rank + 3);
            int_sum[i] += ints[rank][i];
          }
        }
        for (size_t i = 0; i < count; ++i) {
          if (pairs) {
            float_sum[i] = (floats[0][i] + floats[1][i]) + (floats[2][i] + floats[3][i]);
            continue;
          }
          float acc = floats[0][i];
          for (int rank = 1; rank < world; ++rank) acc += floats[rank][i];
          float_sum[i] = acc;
        }
        auto results = OnEveryRank(world, [&](int rank) -> Status {
          const Deadline deadline = DeadlineAfter(kTimeout);
          RETURN_IF_ERROR(ranks->exchanges[rank]->AllReduce(ints[rank].data(), count, DT_INT64,
                                                            deadline));
          return ranks->exchanges[rank]->AllReduce(floats[rank].data(), count, DT_FLOAT,
                                                   deadline);
        });
        for (int rank = 0; rank < world; ++rank) {
          ASSERT_TRUE(results[rank].ok()) << "world " << world << " rank " << rank << ": "
                                          << results[rank];
          EXPECT_EQ(ints[rank], int_sum) << "world " << world << " count " << count;
          EXPECT_EQ(0, std::memcmp(floats[rank].data(), float_sum.data(), count * sizeof(float)))
              << "world " << world << " rank " << rank << " count " << count
              << " schedule " << static_cast<int>(schedule);
        }
      }
    }
  }
}

// Groups of a 4-rank job (ExchangeOptions::members), as the axes of a 2-D
// placement use them: {2, 0} and {1, 3} at once on two channels, then {3,
// 1, 0} (not in rank order) with rank 2 idle. Each member gets its group's
// sum, floats added in group order; a group without the caller, or with a
// rank twice, is refused naming it.
TEST_P(ExchangeTest, GroupsOfTheJobSumTheirMembersOnly) {
  auto ranks = MakeWorld(GetParam(), 4);
  struct Group {
    std::vector<int> members;
    uint32_t channel;
  };
  for (ExchangeSchedule schedule : {ExchangeSchedule::kDirect, ExchangeSchedule::kScatterGather}) {
    for (const std::vector<Group>& groups :
         {std::vector<Group>{{{2, 0}, 0x300}, {{1, 3}, 0x301}},
          std::vector<Group>{{{3, 1, 0}, 0x302}}}) {
      std::vector<std::unique_ptr<ExchangeCommunicator>> mine(4);
      std::vector<const Group*> group_of(4, nullptr);
      for (const Group& group : groups) {
        for (int rank : group.members) {
          ExchangeOptions options;
          options.channel = group.channel;
          options.tag = group.channel;
          options.schedule = schedule;
          options.members = group.members;
          auto created = ExchangeCommunicator::Create(ranks->transports[rank].get(),
                                                      ranks->routers[rank].get(), options);
          ASSERT_TRUE(created.ok()) << created.status();
          mine[rank] = std::move(*created);
          group_of[rank] = &group;
        }
      }
      const size_t count = 5003;  // a few pieces per segment
      std::vector<std::vector<float>> values(4, std::vector<float>(count));
      for (int rank = 0; rank < 4; ++rank) {
        for (size_t i = 0; i < count; ++i) values[rank][i] = 0.1f * (i % 89) + 1.0f / (rank + 3);
      }
      const std::vector<std::vector<float>> inputs = values;
      auto statuses = OnEveryRank(4, [&](int rank) -> Status {
        if (mine[rank] == nullptr) return Status::OK();
        return mine[rank]->AllReduce(values[rank].data(), count, DT_FLOAT, DeadlineAfter(kTimeout));
      });
      for (int rank = 0; rank < 4; ++rank) {
        ASSERT_TRUE(statuses[rank].ok()) << "rank " << rank << ": " << statuses[rank];
        if (group_of[rank] == nullptr) {
          EXPECT_EQ(values[rank], inputs[rank]) << "rank " << rank << " is in no group";
          continue;
        }
        const std::vector<int>& members = group_of[rank]->members;
        std::vector<float> sum = inputs[members[0]];
        for (size_t m = 1; m < members.size(); ++m) {
          for (size_t i = 0; i < count; ++i) sum[i] += inputs[members[m]][i];
        }
        EXPECT_EQ(0, std::memcmp(values[rank].data(), sum.data(), count * sizeof(float)))
            << "rank " << rank << " schedule " << static_cast<int>(schedule);
      }
    }
  }
  ExchangeOptions outside;
  outside.members = {1, 2};
  auto refused = ExchangeCommunicator::Create(ranks->transports[0].get(), ranks->routers[0].get(),
                                              outside);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("rank 0 is not in its group"), std::string::npos)
      << refused.status();
  outside.members = {0, 3, 0};
  refused = ExchangeCommunicator::Create(ranks->transports[0].get(), ranks->routers[0].get(),
                                         outside);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("rank 0 appears twice"), std::string::npos)
      << refused.status();
}

// A rank may run calls (and rounds) ahead of a slow one: its pieces are
// staged per call, and added when the slow rank's round begins.
TEST_P(ExchangeTest, APeerRunningAheadIsStagedPerCall) {
  for (auto [world, schedule] :
       {std::pair{2, ExchangeSchedule::kDoubling}, std::pair{4, ExchangeSchedule::kDoubling},
        std::pair{3, ExchangeSchedule::kScatterGather},
        std::pair{4, ExchangeSchedule::kScatterGather}}) {
    auto ranks = MakeWorld(GetParam(), world, {}, schedule);
    constexpr int kCalls = 20;
    std::vector<std::vector<int32_t>> results(world, std::vector<int32_t>(kCalls));
    auto statuses = OnEveryRank(world, [&](int rank) -> Status {
      for (int call = 0; call < kCalls; ++call) {
        if (rank == 1 && call % 5 == 0) std::this_thread::sleep_for(milliseconds(20));
        std::vector<int32_t> value(3000, call + rank * 100);
        RETURN_IF_ERROR(ranks->exchanges[rank]->AllReduce(value.data(), value.size(), DT_INT32,
                                                          DeadlineAfter(kTimeout)));
        results[rank][call] = value[2999];
      }
      return Status::OK();
    });
    const int32_t rank_sum = 100 * world * (world - 1) / 2;
    for (int rank = 0; rank < world; ++rank) {
      ASSERT_TRUE(statuses[rank].ok()) << "world " << world << ": " << statuses[rank];
      for (int call = 0; call < kCalls; ++call) {
        EXPECT_EQ(results[rank][call], world * call + rank_sum) << "world " << world;
      }
    }
  }
}

// Two collectives given the same channel by mistake (different tags) are
// caught and named, not mixed. The rank that sees the foreign piece first
// fails at once (and sends nothing more), so its peer may instead wait out
// its deadline; at least one names the other's tag, neither succeeds.
TEST_P(ExchangeTest, ATagMismatchFailsNamingThePeer) {
  auto ranks = MakeWorld(GetParam(), 2, {7, 8});
  // A rank whose communicator fails on the other's piece before its own
  // call starts sends nothing: the other then waits out its deadline.
  auto statuses = OnEveryRank(2, [&](int rank) -> Status {
    std::vector<float> value(10, 1.f);
    return ranks->exchanges[rank]->AllReduce(value.data(), 10, DT_FLOAT,
                                             DeadlineAfter(milliseconds(1000)));
  });
  int named = 0;
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_FALSE(statuses[rank].ok()) << "rank " << rank;
    if (statuses[rank].code() == StatusCode::kDataLoss) {
      EXPECT_NE(statuses[rank].message().find("rank " + std::to_string(1 - rank) + " sent tag"),
                std::string::npos)
          << statuses[rank];
      ++named;
    } else {
      EXPECT_EQ(statuses[rank].code(), StatusCode::kDeadlineExceeded) << statuses[rank];
    }
  }
  EXPECT_GE(named, 1);
}

// A rank that never joins: the other's wait ends at its deadline naming it,
// and the cancel flag ends a wait within its poll.
TEST_P(ExchangeTest, WaitsAreBoundedAndCancellable) {
  auto ranks = MakeWorld(GetParam(), 2);
  std::vector<float> value(10, 1.f);
  Status late = ranks->exchanges[0]->AllReduce(value.data(), 10, DT_FLOAT,
                                               DeadlineAfter(milliseconds(200)));
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded) << late;
  EXPECT_NE(late.message().find("waits for rank 1"), std::string::npos) << late;

  auto cancellable = MakeWorld(GetParam(), 2);
  CancelFlag flag;
  ExchangeOptions options;
  options.channel = 0x300;
  options.cancel = &flag;
  auto exchange = ExchangeCommunicator::Create(cancellable->transports[0].get(),
                                               cancellable->routers[0].get(), options);
  ASSERT_TRUE(exchange.ok());
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(100));
    flag.Cancel(AbortedError("rank 1 failed"));
  });
  Status cancelled = (*exchange)->AllReduce(value.data(), 10, DT_FLOAT, DeadlineAfter(kTimeout));
  canceller.join();
  EXPECT_EQ(cancelled.code(), StatusCode::kAborted) << cancelled;
  // Sticky: the ranks are out of step.
  EXPECT_FALSE((*exchange)->AllReduce(value.data(), 10, DT_FLOAT, DeadlineAfter(kTimeout)).ok());
}

// Pieces that could not come from a communicator (truncated, announcing
// more than max_bytes, out of their buffer) fail the receiving rank's call
// with DataLoss naming the sender, before it allocates or writes anything.
TEST_P(ExchangeTest, HostilePiecesFailNamingTheSender) {
  auto piece = [](uint64_t total, uint64_t offset, size_t length) {
    std::string bytes(1, '\x01');
    wire::AppendU64(&bytes, 7);  // the tag
    wire::AppendU64(&bytes, 1);  // the call
    wire::AppendU64(&bytes, total);
    wire::AppendU64(&bytes, offset);
    bytes.append(length, '\x02');
    return bytes;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", std::string("\x01\x07", 2)},
      {"huge", piece(uint64_t{1} << 62, 0, 8)},
      {"above max_bytes", piece((size_t{1} << 30) + 8, 0, 8)},
      {"out of range", piece(16, 12, 8)},
  };
  for (const auto& [name, bytes] : cases) {
    auto ranks = MakeWorld(GetParam(), 2);
    Connection* to_rank0 = *ranks->transports[1]->GetConnection(0);
    ASSERT_TRUE(MessageRouter::Send(to_rank0, ExchangeOptions().channel, bytes).ok()) << name;
    std::vector<float> value(4, 1.f);
    Status status = ranks->exchanges[0]->AllReduce(value.data(), 4, DT_FLOAT,
                                                   DeadlineAfter(milliseconds(5000)));
    EXPECT_EQ(status.code(), StatusCode::kDataLoss) << name << ": " << status;
    EXPECT_NE(status.message().find("rank 1"), std::string::npos) << name << ": " << status;
  }
}

// Scatter-gather: a peer's sum of its segment (a type-2 piece) announcing
// another size than that segment's fails the call naming the sender,
// whether it came before the call (staged) or during it.
TEST_P(ExchangeTest, AnEarlySegmentSumOfTheWrongSizeFailsNamingTheSender) {
  auto ranks = MakeWorld(GetParam(), 3, {}, ExchangeSchedule::kScatterGather);
  std::string bytes(1, '\x02');
  wire::AppendU64(&bytes, 7);  // the tag
  wire::AppendU64(&bytes, 1);  // the call
  wire::AppendU64(&bytes, 8);  // total: rank 1's segment of 4 floats is 4 bytes
  wire::AppendU64(&bytes, 0);  // offset
  bytes.append(8, '\x02');
  Connection* to_rank0 = *ranks->transports[1]->GetConnection(0);
  ASSERT_TRUE(MessageRouter::Send(to_rank0, ExchangeOptions().channel, bytes).ok());
  // Most likely staged before the call begins; if it comes later, the
  // call's direct copy refuses it the same way.
  std::this_thread::sleep_for(milliseconds(50));
  std::vector<float> value(4, 1.f);
  Status status = ranks->exchanges[0]->AllReduce(value.data(), 4, DT_FLOAT,
                                                 DeadlineAfter(milliseconds(5000)));
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status;
}

// Ranks calling with different counts: each fails naming a rank (at
// least one with DataLoss; a rank failing first sends nothing more, so its
// peer may wait out the deadline), none returns a wrong sum as success.
TEST_P(ExchangeTest, RanksDisagreeingOnTheSizeFail) {
  for (auto [world, schedule] :
       {std::pair{2, ExchangeSchedule::kDoubling}, std::pair{3, ExchangeSchedule::kDirect},
        std::pair{4, ExchangeSchedule::kDoubling}, std::pair{3, ExchangeSchedule::kScatterGather},
        std::pair{4, ExchangeSchedule::kScatterGather}}) {
    auto ranks = MakeWorld(GetParam(), world, {}, schedule);
    auto statuses = OnEveryRank(world, [&](int rank) -> Status {
      std::vector<float> value(rank == 0 ? 2000 : 3000, 1.f);
      return ranks->exchanges[rank]->AllReduce(value.data(), value.size(), DT_FLOAT,
                                               DeadlineAfter(milliseconds(1000)));
    });
    int named = 0;
    for (int rank = 0; rank < world; ++rank) {
      ASSERT_FALSE(statuses[rank].ok()) << "world " << world << " rank " << rank;
      if (statuses[rank].code() == StatusCode::kDataLoss) {
        EXPECT_NE(statuses[rank].message().find("disagree"), std::string::npos)
            << statuses[rank];
        ++named;
      }
    }
    EXPECT_GE(named, 1) << "world " << world;
  }
}

// Recursive doubling pairs ranks up: a world of 3 is refused at creation.
TEST_P(ExchangeTest, DoublingRefusesAWorldThatIsNotAPowerOf2) {
  auto ranks = MakeWorld(GetParam(), 3);
  ExchangeOptions options;
  options.channel = 0x300;
  options.schedule = ExchangeSchedule::kDoubling;
  auto exchange = ExchangeCommunicator::Create(ranks->transports[0].get(),
                                               ranks->routers[0].get(), options);
  ASSERT_FALSE(exchange.ok());
  EXPECT_EQ(exchange.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(exchange.status().message().find("3 ranks"), std::string::npos) << exchange.status();
}

TEST_P(ExchangeTest, RefusesADtypeItCannotSum) {
  auto ranks = MakeWorld(GetParam(), 2);
  uint8_t value[4] = {};
  Status status = ranks->exchanges[0]->AllReduce(value, 4, DT_BOOL, DeadlineAfter(kTimeout));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
}

// What each rank sends, summed over the ranks: (N - 1) N times the buffer
// directly, log2 N N times by doubling, 2 (N - 1) times (the ring's
// total) by scatter-gather, also when segments are uneven or empty.
TEST(ExchangeBytesTest, BytesSentFollowTheSchedule) {
  for (int world : {2, 3, 4, 5, 8}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{1001}}) {
      const size_t bytes = count * 4;
      size_t direct = 0, scatter_gather = 0;
      for (int rank = 0; rank < world; ++rank) {
        direct += ExchangeCommunicator::BytesSent(count, 4, rank, world, ExchangeSchedule::kDirect);
        scatter_gather += ExchangeCommunicator::BytesSent(count, 4, rank, world,
                                                          ExchangeSchedule::kScatterGather);
      }
      EXPECT_EQ(direct, world == 2 ? 2 * bytes : static_cast<size_t>(world * (world - 1)) * bytes)
          << world << " " << count;
      EXPECT_EQ(scatter_gather, 2 * static_cast<size_t>(world - 1) * bytes)
          << world << " " << count;
    }
  }
  EXPECT_EQ(ExchangeCommunicator::BytesSent(1000, 4, 0, 8, ExchangeSchedule::kDoubling), 3u * 4000);
  EXPECT_EQ(ExchangeCommunicator::BytesSent(1000, 4, 0, 1, ExchangeSchedule::kDirect), 0u);
}

INSTANTIATE_TEST_SUITE_P(Providers, ExchangeTest,
                         ::testing::Values("tcp", "tcp_poll", "shm", "shm_poll"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace comm
}  // namespace oflite
