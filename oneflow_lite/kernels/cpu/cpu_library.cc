#include "oneflow_lite/kernels/cpu/cpu_library.h"

#include <atomic>

namespace oflite {
namespace {
std::atomic<CpuKernelLibrary> g_library{CpuKernelLibrary::kOneDnn};
}  // namespace

const char* CpuKernelLibraryName(CpuKernelLibrary library) {
  return library == CpuKernelLibrary::kOneDnn ? "onednn" : "reference";
}

StatusOr<CpuKernelLibrary> ParseCpuKernelLibrary(const std::string& text,
                                                 const std::string& source) {
  if (text == "onednn") return CpuKernelLibrary::kOneDnn;
  if (text == "reference") return CpuKernelLibrary::kReference;
  return InvalidArgumentError(source, " '", text, "' is not a CPU kernel library: onednn or "
                              "reference");
}

void SetCpuKernelLibrary(CpuKernelLibrary library) { g_library.store(library); }

CpuKernelLibrary GetCpuKernelLibrary() { return g_library.load(); }

}  // namespace oflite
