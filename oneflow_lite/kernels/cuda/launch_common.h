// Plain-C++ interface shared by the CUDA kernel launchers (.cu files include
// no protobuf or glog). A StridedIndex describes an N-d iteration space
// (row-major `dims`) and, for up to three operands, the element stride of
// each dim plus a base offset, so one launcher serves broadcasting,
// transposes, slices, concats and reductions.
//
// Launchers only enqueue work on the given stream and return
// cudaGetLastError(); they never block and never allocate.
#ifndef ONEFLOW_LITE_KERNELS_CUDA_LAUNCH_COMMON_H_
#define ONEFLOW_LITE_KERNELS_CUDA_LAUNCH_COMMON_H_

#include <cstdint>

#include <cuda_runtime_api.h>

namespace oflite {
namespace cuda {

constexpr int kMaxRank = 8;
constexpr int kMaxOperands = 3;

struct StridedIndex {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxOperands][kMaxRank] = {};
  int64_t base[kMaxOperands] = {};

  int64_t Count() const {
    int64_t count = 1;
    for (int d = 0; d < rank; ++d) count *= dims[d];
    return count;
  }
};

// A device error slot: slot[0] != 0 once a kernel found bad input (set by the
// first offender with atomicCAS), slot[1] = its flat position, slot[2] = the
// offending value. Lives in mapped pinned host memory (see error_slot.h).
using ErrorSlot = long long;

}  // namespace cuda
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CUDA_LAUNCH_COMMON_H_
