// Starting a program again so OpenBLAS loads the right kernels.
//
// OpenBLAS (Debian's, built for every x86 family) chooses its kernels when
// it loads, before main, from the CPU it recognizes or OPENBLAS_CORETYPE.
// On CPUs newer than the installed OpenBLAS knows it falls back to SSE3
// ("Prescott"), 3-4x slower than the AVX-512 kernels the CPU can run. The
// only way to change that choice is to exec the program again with the
// variable set, which these functions do. For main() of the oflite CLI and
// the benchmarks only (a library must never exec); the float32 GEMMs and
// convolutions do not depend on it by default (they run on oneDNN), the
// reference kernels and float64 do.
#ifndef TOOLS_OFLITE_OPENBLAS_CORE_H_
#define TOOLS_OFLITE_OPENBLAS_CORE_H_

#include <string>

namespace oflite {
namespace cli {

// When OPENBLAS_CORETYPE is unset (or empty) and PreferredOpenBlasCore()
// (kernels/cpu/cpu_threads.h) names a wider family than OpenBLAS picked,
// sets the variable to it and execs /proc/self/exe with `argv` (same pid,
// arguments and environment otherwise). The re-executed program finds the
// variable set and carries on. Returns when nothing needed doing, or after
// a warning on stderr if exec failed (the program then runs as it is).
// Setting OPENBLAS_CORETYPE yourself (any value) turns this off.
void ReexecForOpenBlasCore(char** argv);

// Execs with OPENBLAS_CORETYPE=`core` unless it already has that value
// (the benchmarks' --openblas_coretype). Returns as above.
void ReexecWithOpenBlasCore(const std::string& core, char** argv);

}  // namespace cli
}  // namespace oflite

#endif  // TOOLS_OFLITE_OPENBLAS_CORE_H_
