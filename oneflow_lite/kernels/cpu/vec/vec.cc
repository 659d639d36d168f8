#include "oneflow_lite/kernels/cpu/vec/vec.h"

namespace oflite {
namespace vec {

// Defined by vec_baseline.cc, vec_avx2.cc, vec_avx512.cc.
const Table* BaselineTable();
#if defined(__x86_64__)
const Table* Avx2Table();
const Table* Avx512Table();
#endif

namespace {

bool CpuSupports(Isa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kBaseline:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && CpuSupports(Isa::kAvx2);
  }
  return false;
#else
  return isa == Isa::kBaseline;
#endif
}

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return "baseline";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::vector<const Table*> SupportedTables() {
  std::vector<const Table*> tables = {BaselineTable()};
#if defined(__x86_64__)
  if (CpuSupports(Isa::kAvx2)) tables.push_back(Avx2Table());
  if (CpuSupports(Isa::kAvx512)) tables.push_back(Avx512Table());
#endif
  return tables;
}

const Table& Active() {
  static const Table* const active = SupportedTables().back();
  return *active;
}

}  // namespace vec
}  // namespace oflite
