/* "--name=value" integer flags for the benches written in C (OpenMPI's
 * program, the bare TCP ring): header-only, no dependencies. */
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
