/* "--name=value" integer flags of OpenMPI's program (mpi_allreduce_bench.c):
 * mpicc compiles it outside Bazel, so it cannot link the C++ flag layer
 * (oneflow_lite/session/flags.h) that every other bench uses.
 * Header-only, no dependencies. */
#ifndef ONEFLOW_LITE_TOOLS_BENCH_C_BENCH_FLAGS_H_
#define ONEFLOW_LITE_TOOLS_BENCH_C_BENCH_FLAGS_H_

#include <stdlib.h>
#include <string.h>

/* The value of --`name`=N among argv, or `fallback` when absent. */
static long long bench_flag(int argc, char** argv, const char* name, long long fallback) {
  size_t length = strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, name, length) == 0 &&
        argv[i][2 + length] == '=') {
      return atoll(argv[i] + 3 + length);
    }
  }
  return fallback;
}

#endif  /* ONEFLOW_LITE_TOOLS_BENCH_C_BENCH_FLAGS_H_ */
