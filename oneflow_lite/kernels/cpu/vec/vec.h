// Vectorized float32 loops of the hot CPU kernels, dispatched at run time to
// the widest instruction set the processor supports.
//
// The same loop bodies (vec_impl.inc) are compiled three times, each
// translation unit with its own target flags (BUILD): baseline x86-64
// (SSE2), AVX2+FMA and AVX-512 (F, VL, DQ). The first call picks the widest
// table whose instructions the CPU reports (__builtin_cpu_supports), so one
// binary runs on any x86-64 processor and uses AVX-512 where it exists. On
// other architectures only the baseline table exists.
//
// The kernels in kernels/cpu keep their plain loops as the reference; tests
// (vec_test.cc) compare every table the machine supports against them at odd
// sizes. Results are bit-identical to the reference on every table: the
// loops only vectorize independent elements (no reassociated sums) and are
// compiled without fused multiply-adds (-ffp-contract=off).
//
// Elementwise outputs may be the same buffer as an input; the optimizer
// loops' buffers must not overlap. All functions are thread-safe (no state besides the table
// chosen once).
#ifndef ONEFLOW_LITE_KERNELS_CPU_VEC_VEC_H_
#define ONEFLOW_LITE_KERNELS_CPU_VEC_VEC_H_

#include <vector>

#include "oneflow_lite/kernels/cpu/vec/vec_table.h"

namespace oflite {
namespace vec {

const char* IsaName(Isa isa);

// The table the dispatcher chose for this CPU (chosen on the first call).
const Table& Active();

// Every table this CPU can run, baseline first (tests compare each).
std::vector<const Table*> SupportedTables();

}  // namespace vec
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_VEC_VEC_H_
