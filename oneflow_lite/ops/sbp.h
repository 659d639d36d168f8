// SBP helpers: constructing, comparing and printing SbpParallel values, and
// the SbpSignature an op offers to the compiler.
//
// An SbpSignature fixes one SbpParallel per flattened input and per
// flattened output (inputs/outputs flattened in OpConf order: arg by arg,
// lbn by lbn). Signatures are 1-D (one placement level); the compiler
// applies them per hierarchy level.
#ifndef ONEFLOW_LITE_OPS_SBP_H_
#define ONEFLOW_LITE_OPS_SBP_H_

#include <string>
#include <vector>

#include "oneflow_lite/common/shape.h"
#include "proto/common.pb.h"

namespace oflite {

SbpParallel SplitSbp(int64_t axis);
SbpParallel BroadcastSbp();
SbpParallel PartialSumSbp();

bool IsSplit(const SbpParallel& sbp);
bool IsBroadcast(const SbpParallel& sbp);
bool IsPartialSum(const SbpParallel& sbp);
bool SbpEqual(const SbpParallel& a, const SbpParallel& b);
// "S(0)", "B", "P".
std::string SbpToString(const SbpParallel& sbp);

struct SbpSignature {
  std::vector<SbpParallel> inputs;
  std::vector<SbpParallel> outputs;

  std::string ToString() const;  // "S(0), B -> S(0)"
};

// Every input and output broadcast: always valid for any op.
SbpSignature AllBroadcastSignature(int num_inputs, int num_outputs);

// The axis a sharded optimizer lays a variable of `shape` out on over n
// devices (docs/compiler.md, "Sharded optimizer states"): the first axis
// with at least n rows, or -1 when none has (the variable stays B).
int64_t ShardAxis(const Shape& shape, int64_t parallel_num);

}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_SBP_H_
