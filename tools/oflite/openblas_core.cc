#include "tools/oflite/openblas_core.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"

namespace oflite {
namespace cli {

void ReexecWithOpenBlasCore(const std::string& core, char** argv) {
  const char* current = std::getenv("OPENBLAS_CORETYPE");
  if (core.empty() || (current != nullptr && core == current)) return;
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "warning: cannot re-execute with OPENBLAS_CORETYPE=%s (%s); OpenBLAS keeps "
               "its own choice\n", core.c_str(), std::strerror(errno));
}

void ReexecForOpenBlasCore(char** argv) {
  const char* current = std::getenv("OPENBLAS_CORETYPE");
  if (current != nullptr && *current != '\0') return;
  ReexecWithOpenBlasCore(PreferredOpenBlasCore(), argv);
}

}  // namespace cli
}  // namespace oflite
