// The baseline table of vec.h (target flags: BUILD, target "vec_baseline").
#define OFLITE_VEC_TABLE_FUNCTION BaselineTable
#define OFLITE_VEC_ISA ::oflite::vec::Isa::kBaseline
#include "oneflow_lite/kernels/cpu/vec/vec_impl.inc"
