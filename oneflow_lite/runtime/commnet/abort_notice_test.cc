#include "oneflow_lite/runtime/commnet/abort_notice.h"

#include <atomic>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/tcp/tcp_transport.h"
#include "oneflow_lite/comm/testing/transport_conformance.h"

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportConformanceTest);

namespace oflite {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// `world` ranks over real TCP sockets in one process, each with a router and
// an AbortNotice that records what its peer-abort handler heard.
struct Job {
  struct Heard {
    std::mutex mutex;
    int rank = -1;
    Status reason;
    int calls = 0;
  };
  std::vector<std::unique_ptr<comm::MessageRouter>> routers;
  std::vector<std::unique_ptr<comm::Transport>> transports;
  std::vector<Heard> heard;
  std::vector<std::unique_ptr<AbortNotice>> notices;

  explicit Job(int world) : heard(world) {
    std::vector<comm::TransportOptions> options(world);
    for (int rank = 0; rank < world; ++rank) {
      routers.push_back(std::make_unique<comm::MessageRouter>());
      options[rank].rank = rank;
      options[rank].world_size = world;
      options[rank].on_message = routers[rank]->AsHandler();
    }
    comm::TransportFactory tcp{"tcp", [](const comm::TransportOptions& o) {
                                 return comm::tcp::CreateTcpTransport(o, comm::tcp::TcpOptions());
                               }};
    auto created = comm::CreateConnectedTransports(tcp, options, milliseconds(20000));
    CHECK(created.ok()) << created.status();
    transports = std::move(*created);
    for (int rank = 0; rank < world; ++rank) {
      Heard* mine = &heard[rank];
      notices.push_back(std::make_unique<AbortNotice>(
          transports[rank].get(), routers[rank].get(), [mine](int peer, const Status& reason) {
            std::lock_guard<std::mutex> lock(mine->mutex);
            mine->rank = peer;
            mine->reason = reason;
            ++mine->calls;
          }));
    }
  }
  ~Job() {
    notices.clear();
    transports.clear();
  }
  // Waits (bounded) until rank `rank`'s notice has seen an abort.
  bool WaitAborted(int rank, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (notices[rank]->status().ok() && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    return !notices[rank]->status().ok();
  }
};

TEST(AbortNoticeTest, EncodeDecodeRoundTrip) {
  const std::string notice =
      AbortNotice::Encode(3, InvalidArgumentError("op 'dense1' saw NaN"));
  int rank = -1;
  Status error;
  ASSERT_TRUE(AbortNotice::Decode(notice.data(), notice.size(), &rank, &error).ok());
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(error, InvalidArgumentError("op 'dense1' saw NaN"));
}

TEST(AbortNoticeTest, LongMessagesAreCutAndMalformedNoticesRefused) {
  const std::string notice = AbortNotice::Encode(0, InternalError(std::string(10000, 'x')));
  int rank = -1;
  Status error;
  ASSERT_TRUE(AbortNotice::Decode(notice.data(), notice.size(), &rank, &error).ok());
  EXPECT_EQ(error.message().size(), AbortNotice::kMaxMessageBytes);
  for (size_t size = 0; size < notice.size(); size += 97) {  // every truncation
    EXPECT_EQ(AbortNotice::Decode(notice.data(), size, &rank, &error).code(),
              StatusCode::kDataLoss)
        << size;
  }
  std::string bad_version = notice;
  bad_version[0] = 2;
  EXPECT_FALSE(AbortNotice::Decode(bad_version.data(), bad_version.size(), &rank, &error).ok());
  std::string ok_code = AbortNotice::Encode(0, Status());  // code 0 is not a failure
  EXPECT_FALSE(AbortNotice::Decode(ok_code.data(), ok_code.size(), &rank, &error).ok());
}

// Rank 1 fails locally: every peer hears "rank 1 failed: <its error>" at
// once, listeners first, then the handler; echoes are ignored.
TEST(AbortNoticeTest, BroadcastReachesEveryPeerNamingTheRank) {
  for (int world : {2, 3, 4}) {
    SCOPED_TRACE("world " + std::to_string(world));
    Job job(world);
    std::vector<std::atomic<int>> listened(world);
    for (int rank = 0; rank < world; ++rank) {
      job.notices[rank]->AddListener([&listened, rank](const Status& reason) {
        EXPECT_FALSE(reason.ok());
        ++listened[rank];
      });
    }
    const auto start = Clock::now();
    EXPECT_TRUE(job.notices[1]->Broadcast(InternalError("kernel 'relu0' failed at iteration 4")));
    for (int rank = 0; rank < world; ++rank) {
      ASSERT_TRUE(job.WaitAborted(rank, milliseconds(10000))) << "rank " << rank;
      EXPECT_EQ(job.notices[rank]->failed_rank(), 1);
      EXPECT_EQ(listened[rank].load(), 1);
    }
    EXPECT_LT(Clock::now() - start, milliseconds(10000));
    EXPECT_EQ(job.notices[1]->status(), InternalError("kernel 'relu0' failed at iteration 4"));
    for (int rank = 0; rank < world; ++rank) {
      if (rank == 1) continue;
      const Status reason = job.notices[rank]->status();
      EXPECT_EQ(reason.code(), StatusCode::kAborted);
      EXPECT_EQ(reason.message(),
                "rank 1 failed: INTERNAL: kernel 'relu0' failed at iteration 4");
      // The peer's own failure that follows is an echo: not broadcast.
      EXPECT_FALSE(job.notices[rank]->Broadcast(reason));
      std::lock_guard<std::mutex> lock(job.heard[rank].mutex);
      EXPECT_EQ(job.heard[rank].rank, 1);
      EXPECT_EQ(job.heard[rank].calls, 1);
    }
    std::lock_guard<std::mutex> lock(job.heard[1].mutex);
    EXPECT_EQ(job.heard[1].calls, 0);  // a local failure is not a peer's
  }
}

TEST(AbortNoticeTest, LateListenerHearsAtOnceAndRemovedListenerNever) {
  Job job(2);
  int removed_calls = 0;
  const int id = job.notices[0]->AddListener([&](const Status&) { ++removed_calls; });
  job.notices[0]->RemoveListener(id);
  job.notices[1]->Broadcast(UnavailableError("watchdog"));
  ASSERT_TRUE(job.WaitAborted(0, milliseconds(10000)));
  EXPECT_EQ(removed_calls, 0);
  Status late;
  job.notices[0]->AddListener([&](const Status& reason) { late = reason; });
  EXPECT_EQ(late.message(), "rank 1 failed: UNAVAILABLE: watchdog");
}

// A garbage frame on the abort channel is that peer's failure too.
TEST(AbortNoticeTest, MalformedNoticeCountsAsThePeersFailure) {
  Job job(2);
  ASSERT_TRUE(comm::MessageRouter::Send(*job.transports[1]->GetConnection(0), kAbortChannel,
                                        "\x07garbage")
                  .ok());
  ASSERT_TRUE(job.WaitAborted(0, milliseconds(10000)));
  EXPECT_EQ(job.notices[0]->failed_rank(), 1);
  EXPECT_NE(job.notices[0]->status().message().find("rank 1 failed: DATA_LOSS: malformed"),
            std::string::npos)
      << job.notices[0]->status();
}

// A loss seen by one rank reaches the others naming the lost rank, not the
// rank that saw it; a notice that reached only one rank is relayed to the
// rest with the original culprit and error.
TEST(AbortNoticeTest, LossesAndNoticesAreRelayedNamingTheFirstCulprit) {
  {
    Job job(3);
    EXPECT_TRUE(job.notices[0]->RecordPeerLoss(1, UnavailableError("rank 1 closed")));
    EXPECT_FALSE(job.notices[0]->RecordPeerLoss(2, UnavailableError("an echo")));
    EXPECT_EQ(job.notices[0]->failed_rank(), 1);
    EXPECT_EQ(job.notices[0]->status().message(), "lost rank 1: UNAVAILABLE: rank 1 closed");
    ASSERT_TRUE(job.WaitAborted(2, milliseconds(10000)));
    EXPECT_EQ(job.notices[2]->failed_rank(), 1);
    EXPECT_NE(job.notices[2]->status().message().find("rank 1 failed: UNAVAILABLE: lost (seen "
                                                      "by rank 0): UNAVAILABLE: rank 1 closed"),
              std::string::npos)
        << job.notices[2]->status();
    std::lock_guard<std::mutex> lock(job.heard[2].mutex);
    EXPECT_EQ(job.heard[2].rank, 1);
  }
  {
    Job job(3);
    const std::string notice =
        AbortNotice::Encode(1, InvalidArgumentError("op 'dense1' saw NaN"));
    ASSERT_TRUE(comm::MessageRouter::Send(*job.transports[1]->GetConnection(0), kAbortChannel,
                                          notice)
                    .ok());
    for (int rank : {0, 2}) {
      ASSERT_TRUE(job.WaitAborted(rank, milliseconds(10000))) << "rank " << rank;
      EXPECT_EQ(job.notices[rank]->failed_rank(), 1) << "rank " << rank;
      EXPECT_EQ(job.notices[rank]->status().message(),
                "rank 1 failed: INVALID_ARGUMENT: op 'dense1' saw NaN")
          << "rank " << rank;
    }
    EXPECT_TRUE(job.notices[1]->status().ok());  // never told its own failure back
  }
}

}  // namespace
}  // namespace oflite
