// Which library computes the float32 CPU convolutions and GEMMs.
//
// kOneDnn (the default): oneDNN primitives (kernels/cpu/onednn) for conv2d
// and its two gradients, and oneDNN's sgemm for matmul and the GEMMs of our
// own kernels. kReference: our own kernels (im2col + OpenBLAS GEMM), which
// the oneDNN kernels are tested against. Builds without oneDNN
// (--config=static) always compute with the reference kernels.
//
// The choice is read when a kernel is created (Kernel::Init), so it is set
// before a runtime or executor is built: `oflite run --cpu-kernels`, the
// OFLITE_CPU_KERNELS environment variable read by the oflite and benchmark
// mains, or SetCpuKernelLibrary in tests. Process-wide, like the BLAS
// thread count; thread-safe. docs/runtime.md, "CPU threads and instruction
// sets".
#ifndef ONEFLOW_LITE_KERNELS_CPU_CPU_LIBRARY_H_
#define ONEFLOW_LITE_KERNELS_CPU_CPU_LIBRARY_H_

#include <string>

#include "oneflow_lite/common/status.h"

namespace oflite {

enum class CpuKernelLibrary { kOneDnn, kReference };

// "onednn" or "reference".
const char* CpuKernelLibraryName(CpuKernelLibrary library);

// Parses "onednn" or "reference"; InvalidArgument naming `source` (a flag or
// variable name) and the accepted values otherwise.
StatusOr<CpuKernelLibrary> ParseCpuKernelLibrary(const std::string& text,
                                                 const std::string& source);

void SetCpuKernelLibrary(CpuKernelLibrary library);
CpuKernelLibrary GetCpuKernelLibrary();

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_CPU_LIBRARY_H_
