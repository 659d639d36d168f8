// Fusion: a Job -> Job pass the compiler runs first (compiler.h), replacing
// chains of ops by one fused op whose kernel makes fewer passes over memory.
// The fused op is recorded in the plan like any op: its KernelConf has the
// fused op type and the attribute "fused_from" ("first_op+second_op"),
// which `oflite inspect --actor` shows. It runs after autodiff, so no
// gradient rule is involved. Fused today:
//
// - bias_add(a, b) -> relu  =>  bias_add_relu(a, b) named after the relu,
//   producing the relu's output blob (same lbn: every consumer, the relu
//   gradient included, is unchanged). Control inputs naming the bias_add
//   (the update of the bias variable waits for its readers) name the fused
//   op instead, which reads the same inputs. Only when the bias_add's
//   output feeds nothing but that relu (no other op, loss or metric), both
//   ops have the same placement, no SBP hints and no control inputs of
//   their own, and they run on CPU or CUDA devices (both have the kernel).
// - gelu(x) (erf form) and its gradients gelu_grad(dy, x)  =>
//   gelu_and_derivative(x) -> y, dydx (the gelu's name; output blob
//   "<gelu>/dydx_0" added) and mul(dy, dydx) in each gelu_grad's place
//   (its name and output blob): the backward multiplies instead of
//   evaluating the CDF and the density again. Only when x feeds nothing but
//   the gelu and its gradients (dydx then takes x's place in memory instead
//   of adding to it), under the same conditions as above, on CPU devices
//   (the only kernel).
// - matmul(a, b) -> bias_add(bias) along the last axis  =>  matmul_bias(a,
//   b, bias) named after the bias_add, producing its output blob, when the
//   matmul is one GEMM (alpha 1, a 2-D b: the Linear case), its output
//   feeds nothing but the bias_add, neither op is a member of a bias_add ->
//   relu pair, and both run on CPU devices (FusionOptions.matmul_bias).
//   The backward is unchanged: the matmul's gradients read a and b, the
//   bias's reads the output's gradient.
//
// bias_add_relu, and gelu_and_derivative followed by mul, compute exactly
// what their chains compute (tested against them:
// kernels/cpu/math/fused_kernels_test.cc, kernels/cpu/vec/vec_test.cc), so
// a plan with only those fusions trains bit-identically to the unfused
// plan. matmul_bias's float32 kernel adds the bias inside oneDNN's matmul
// primitive, whose GEMM may order the sums differently from the sgemm
// behind matmul: results can differ in the last bits (hence opt-in).
// Pure function; thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_FUSION_H_
#define ONEFLOW_LITE_COMPILER_FUSION_H_

#include "proto/job.pb.h"

namespace oflite {
namespace compiler {

struct FusionOptions {
  bool bias_add_relu = true;
  bool gelu_derivative = true;
  // Off by default: not bit-identical to the chain (see above).
  bool matmul_bias = false;
};

struct FusionResult {
  Job job;
  int fused = 0;  // chains replaced
};

FusionResult FuseOps(const Job& job, const FusionOptions& options);

// FuseOps with the default options: the exact fusions only.
FusionResult FuseElementwiseChains(const Job& job);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_FUSION_H_
