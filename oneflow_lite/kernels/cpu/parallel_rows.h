// Splitting a CPU kernel's rows over threads: the one rule every threaded
// kernel of kernels/cpu follows.
//
// A kernel describes its work as `rows` independent units (rows of a
// matrix, blocks of elements) of about `work_per_row` elements each.
// ParallelRows runs fn(begin, end) over contiguous chunks covering
// [0, rows) on the calling thread's OpenMP team, sized to the cpu_threads
// setting (kernels/cpu/cpu_threads.h; OpenMP's default when it was never
// set), as the oneDNN kernels size theirs, but never to more threads than
// give each kMinWorkPerThread elements: below that the team's fork and join
// cost more than they save, and the call stays on the calling thread with
// no OpenMP at all. Thread t of T gets rows [rows t / T, rows (t + 1) / T).
//
// Determinism: the split depends on the thread count, so a kernel gives
// bit-identical results for any cpu_threads only if no value it writes
// depends on where the chunks begin. Rows computed independently qualify;
// a sum across rows must be formed over fixed blocks of rows (FixedBlocks)
// whose partial results are then combined in block order.
//
// Blocks until every chunk is done. fn must be safe to call concurrently on
// disjoint ranges. Called from inside an OpenMP team, fn runs on the calling
// thread alone (nested teams are off).
#ifndef ONEFLOW_LITE_KERNELS_CPU_PARALLEL_ROWS_H_
#define ONEFLOW_LITE_KERNELS_CPU_PARALLEL_ROWS_H_

#include <algorithm>
#include <cstdint>

namespace oflite {

// Elements of work below which a thread is not worth adding: about 10 to 30
// us of vectorized float32 work (a copy, a softmax row pass). Not lower: a
// team's threads spin after the region (libgomp's default wait policy),
// and where ranks share cores unbound (two ranks of cpu_threads 2 on 2
// cores, tests/flood_test.sh) every small region's spinning steals the
// other rank's core: at 16K elements a 2-rank MLP with a [784, 64] weight
// ran 3,000 steps in 20.7 s, at 32K in 2.8 s.
constexpr int64_t kMinWorkPerThread = 32 * 1024;

// The threads ParallelRows(rows, work_per_row, ...) runs on (>= 1).
int RowThreads(int64_t rows, int64_t work_per_row);

namespace parallel_rows_internal {
// Runs body(fn, begin, end) on `threads` (>= 2) OpenMP threads.
void RunChunks(int64_t rows, int threads, void (*body)(const void*, int64_t, int64_t),
               const void* fn);
}  // namespace parallel_rows_internal

template <typename Fn>
void ParallelRows(int64_t rows, int64_t work_per_row, const Fn& fn) {
  if (rows <= 0) return;
  const int threads = RowThreads(rows, work_per_row);
  if (threads <= 1) {
    fn(int64_t{0}, rows);
    return;
  }
  parallel_rows_internal::RunChunks(
      rows, threads,
      [](const void* f, int64_t begin, int64_t end) { (*static_cast<const Fn*>(f))(begin, end); },
      &fn);
}

// fn(begin, end) over [0, count) elements of a flat elementwise loop (each
// about `work_per_element` elements of work), in chunks that begin at
// multiples of kElementBlock (whole cache lines).
constexpr int64_t kElementBlock = 64;

template <typename Fn>
void ParallelElements(int64_t count, const Fn& fn, int64_t work_per_element = 1) {
  ParallelRows((count + kElementBlock - 1) / kElementBlock, kElementBlock * work_per_element,
               [&](int64_t begin, int64_t end) {
                 fn(begin * kElementBlock, std::min(count, end * kElementBlock));
               });
}

// A fixed split of `rows` into blocks of kRowsPerBlock rows (the last one
// shorter) for sums across rows: a kernel sums each block into its own
// partial result, threads take whole blocks (ParallelRows over count()),
// and the partials are added in block order. The blocks depend on `rows`
// alone, so the sum's bits do not depend on the thread count.
struct FixedBlocks {
  static constexpr int64_t kRowsPerBlock = 32;
  int64_t rows = 0;

  int64_t count() const { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }
  int64_t begin(int64_t block) const { return block * kRowsPerBlock; }
  int64_t end(int64_t block) const { return std::min(rows, (block + 1) * kRowsPerBlock); }
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_PARALLEL_ROWS_H_
