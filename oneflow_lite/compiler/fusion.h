// Fusion: a Job -> Job pass the compiler runs first (compiler.h), replacing
// chains of elementwise ops by one fused op whose CPU/CUDA kernel makes a
// single pass over memory. The fused op is recorded in the plan like any
// op: its KernelConf has the fused op type and the attribute "fused_from"
// ("bias_add_op+relu_op"), which `oflite inspect --actor` shows.
//
// Fused today (forward ops only, after autodiff, so no gradient rule is
// involved):
//   bias_add(a, b) -> relu  =>  bias_add_relu(a, b) named after the relu,
//   producing the relu's output blob (same lbn: every consumer, the relu
//   gradient included, is unchanged). Control inputs naming the bias_add
//   (the update of the bias variable waits for its readers) name the fused
//   op instead, which reads the same inputs.
// A pair is fused only when the bias_add's output feeds nothing but that
// relu (no other op, loss or metric), both ops have the same placement, no
// SBP hints and no control inputs of their own, and the ops run on CPU or CUDA
// devices (both have the fused kernels).
//
// The fused kernels compute exactly what the chain computes (tested against
// it: kernels/cpu/math/fused_kernels_test.cc), so a fused plan trains
// bit-identically to the reference executor running the unfused Job.
// Pure function; thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_FUSION_H_
#define ONEFLOW_LITE_COMPILER_FUSION_H_

#include "proto/job.pb.h"

namespace oflite {
namespace compiler {

struct FusionResult {
  Job job;
  int fused = 0;  // chains replaced
};

FusionResult FuseElementwiseChains(const Job& job);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_FUSION_H_
