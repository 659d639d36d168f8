#include "oneflow_lite/kernels/cpu/parallel_rows.h"

#include <omp.h>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"

namespace oflite {

int RowThreads(int64_t rows, int64_t work_per_row) {
  int64_t threads = CpuComputeThreadsSetting();
  if (threads <= 0) threads = omp_get_max_threads();
  const int64_t by_work = rows * std::max<int64_t>(work_per_row, 1) / kMinWorkPerThread;
  threads = std::min({threads, rows, by_work});
  if (threads <= 1 || omp_in_parallel()) return 1;
  return static_cast<int>(threads);
}

namespace parallel_rows_internal {

void RunChunks(int64_t rows, int threads, void (*body)(const void*, int64_t, int64_t),
               const void* fn) {
#pragma omp parallel num_threads(threads)
  {
    // The team may be smaller than asked (OpenMP limits); its size splits.
    const int64_t team = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = rows * t / team, end = rows * (t + 1) / team;
    if (begin < end) body(fn, begin, end);
  }
}

}  // namespace parallel_rows_internal
}  // namespace oflite
