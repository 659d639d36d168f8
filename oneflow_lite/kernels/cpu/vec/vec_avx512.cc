// The avx512 table of vec.h (target flags: BUILD, target "vec_avx512").
#define OFLITE_VEC_TABLE_FUNCTION Avx512Table
#define OFLITE_VEC_ISA ::oflite::vec::Isa::kAvx512
#include "oneflow_lite/kernels/cpu/vec/vec_impl.inc"
