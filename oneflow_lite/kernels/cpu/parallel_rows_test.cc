#include "oneflow_lite/kernels/cpu/parallel_rows.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <omp.h>

#include "gtest/gtest.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"

namespace oflite {
namespace {

// Sets cpu_threads for one test and puts the previous value back.
class ThreadsSetting {
 public:
  explicit ThreadsSetting(int threads) : before_(CpuComputeThreadsSetting()) {
    SetCpuComputeThreads(threads);
  }
  ~ThreadsSetting() { SetCpuComputeThreads(before_ > 0 ? before_ : 1); }

 private:
  int before_;
};

// OMP_THREAD_LIMIT=1 (set by --config=tsan: tsan cannot see libgomp's
// synchronization) makes every team one thread; the tests that count a
// team's chunks have nothing to count then.
#define SKIP_WITHOUT_OPENMP_TEAMS()                                               \
  if (omp_get_thread_limit() < 2)                                                \
  GTEST_SKIP() << "OMP_THREAD_LIMIT " << omp_get_thread_limit()                 \
               << ": OpenMP teams of one thread (the tsan configuration)"

// The chunks fn saw, sorted by their start.
std::vector<std::pair<int64_t, int64_t>> Chunks(int64_t rows, int64_t work_per_row) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  ParallelRows(rows, work_per_row, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ParallelRowsTest, ThreadsFollowTheSettingAndTheMinimumWork) {
  {
    ThreadsSetting one(1);
    EXPECT_EQ(RowThreads(1000, 1 << 20), 1);
  }
  ThreadsSetting three(3);
  EXPECT_EQ(RowThreads(1000, 1 << 20), 3);
  EXPECT_EQ(RowThreads(2, 1 << 20), 2);  // never more threads than rows
  EXPECT_EQ(RowThreads(1000, 1), 1);     // too little work to split
  EXPECT_EQ(RowThreads(2, kMinWorkPerThread), 2);
  EXPECT_EQ(RowThreads(3, kMinWorkPerThread - 1), 2);
}

TEST(ParallelRowsTest, ChunksCoverEveryRowOnceInOrder) {
  SKIP_WITHOUT_OPENMP_TEAMS();
  ThreadsSetting three(3);
  for (int64_t rows : {1, 2, 3, 7, 1000}) {
    const auto chunks = Chunks(rows, kMinWorkPerThread);
    ASSERT_EQ(chunks.size(), static_cast<size_t>(std::min<int64_t>(rows, 3))) << rows;
    int64_t next = 0;
    for (const auto& [begin, end] : chunks) {
      EXPECT_EQ(begin, next);
      EXPECT_LT(begin, end);
      next = end;
    }
    EXPECT_EQ(next, rows);
  }
  EXPECT_TRUE(Chunks(0, kMinWorkPerThread).empty());
  // Too little work: one call on the calling thread.
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  ParallelRows(10, 1, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ParallelRowsTest, ElementChunksStartOnBlockBoundaries) {
  SKIP_WITHOUT_OPENMP_TEAMS();
  ThreadsSetting two(2);
  const int64_t count = 4 * kMinWorkPerThread + 5;
  std::vector<std::atomic<int>> seen(count);
  std::atomic<int> chunks{0};
  ParallelElements(count, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(begin % kElementBlock, 0);
    for (int64_t i = begin; i < end; ++i) ++seen[i];
    ++chunks;
  });
  EXPECT_EQ(chunks.load(), 2);
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(seen[i].load(), 1) << i;
}

TEST(ParallelRowsTest, FixedBlocksDependOnTheRowsAlone) {
  const FixedBlocks none{0};
  EXPECT_EQ(none.count(), 0);
  const FixedBlocks blocks{2 * FixedBlocks::kRowsPerBlock + 3};
  ASSERT_EQ(blocks.count(), 3);
  EXPECT_EQ(blocks.begin(1), FixedBlocks::kRowsPerBlock);
  EXPECT_EQ(blocks.end(2), blocks.rows);
}

}  // namespace
}  // namespace oflite
