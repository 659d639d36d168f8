// How many threads the CPU kernels of one process compute with.
//
// A CPU device runs its kernels on its stream thread; the libraries behind
// them (OpenBLAS for matmul and the convolutions' GEMM) may add worker
// threads of their own. `cpu_threads` (ClusterProto machine field, the
// `oflite run --cpu-threads` flag, RuntimeOptions::cpu_threads) is the number
// of threads one CPU device computes with, its stream thread included: the
// runtime hands it to the BLAS library when a runtime is created, so a
// machine with D CPU devices computes with at most D x cpu_threads threads
// and never oversubscribes its cores when D x cpu_threads <= cores.
//
// 0 means "the machine's cores divided among its CPU devices": the CPUs this
// process may run on (sched_getaffinity, so taskset/cgroup limits count)
// divided by the CPU device count, at least 1.
//
// The BLAS thread count is process-wide (a library setting): several
// runtimes in one process (tests running several ranks) share it, and the
// last one applied wins. Thread-safe. docs/runtime.md, "CPU threads".
#ifndef ONEFLOW_LITE_KERNELS_CPU_CPU_THREADS_H_
#define ONEFLOW_LITE_KERNELS_CPU_CPU_THREADS_H_

#include <string>

#include "oneflow_lite/common/status.h"

namespace oflite {

// Largest accepted cpu_threads (also the flag's bound).
constexpr int kMaxCpuThreads = 1024;

// CPUs this process may run on (at least 1).
int AvailableCpuCores();

// The effective per-device thread count: `requested` if > 0, else
// cores / max(1, cpu_devices), at least 1. InvalidArgument (naming `source`,
// e.g. "--cpu-threads" or "cluster.machine[0].cpu_threads") if `requested`
// is negative or above kMaxCpuThreads.
StatusOr<int> ResolveCpuThreads(int requested, int cpu_devices, int cores,
                                const std::string& source);

// Gives `threads` (>= 1) to the BLAS library and records it for the
// oneDNN kernels, which size the OpenMP team of their calling thread to it
// (kernels/cpu/onednn/onednn.h). Process-wide; thread-safe.
void SetCpuComputeThreads(int threads);

// The last value SetCpuComputeThreads applied (clamped to >= 1), or 0 if it
// was never called (the libraries' own defaults then apply). Lock-free.
int CpuComputeThreadsSetting();

// The BLAS library's current thread count.
int CpuComputeThreads();

// The OpenBLAS kernel family (an OPENBLAS_CORETYPE value) this CPU should
// get when the one OpenBLAS picked when it loaded is weaker: "SkylakeX" for
// AVX-512 (F, CD, BW, DQ, VL), "Haswell" for AVX2 + FMA; empty when OpenBLAS
// already uses a family at least that wide, or its name is one this
// function does not rank. (OpenBLAS 0.3.21 falls back to "Prescott", SSE3,
// on CPUs newer than it knows, e.g. model 207.) OpenBLAS reads
// OPENBLAS_CORETYPE only when it loads, so acting on this means starting the
// program again with the variable set (tools/oflite/openblas_core.h).
std::string PreferredOpenBlasCore();

// One line for logs and benchmarks: the BLAS library's kernel family (e.g.
// "OpenBLAS core Haswell") and thread count, and the instruction set our own
// vectorized kernels dispatch to (kernels/cpu/vec/vec.h).
std::string CpuComputeDescription();

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_CPU_THREADS_H_
