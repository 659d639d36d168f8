// The avx2 table of vec.h (target flags: BUILD, target "vec_avx2").
#define OFLITE_VEC_TABLE_FUNCTION Avx2Table
#define OFLITE_VEC_ISA ::oflite::vec::Isa::kAvx2
#include "oneflow_lite/kernels/cpu/vec/vec_impl.inc"
