// CopyKernel: copies the bytes of one input blob to one output blob of the
// same byte size (identity, reshape, reshape_like, flatten; any dtype),
// split over threads when large.
// Stateless; returns an error naming the op if the sizes differ.
#ifndef ONEFLOW_LITE_KERNELS_CPU_MATH_COPY_KERNEL_H_
#define ONEFLOW_LITE_KERNELS_CPU_MATH_COPY_KERNEL_H_

#include <algorithm>
#include <cstring>

#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace math {

// memcpy of `bytes` split over threads (kernels/cpu/parallel_rows.h), in
// blocks of 256 bytes (about 64 elements of work each).
inline void CopyBytes(const void* src, void* dst, int64_t bytes) {
  constexpr int64_t kBlock = 256;
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  ParallelRows((bytes + kBlock - 1) / kBlock, kBlock / 4, [&](int64_t first, int64_t last) {
    const int64_t begin = first * kBlock, end = std::min(bytes, last * kBlock);
    std::memcpy(to + begin, from + begin, end - begin);
  });
}

class CopyKernel : public Kernel {
 public:
  // `in` and `out` are argument names with static storage.
  CopyKernel(const char* in, const char* out) : in_(in), out_(out) {}

  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input(in_);
    Blob* y = ctx->Output(out_);
    if (x.ByteSize() != y->ByteSize()) {
      return ctx->Error("blob sizes disagree: ", in_, " ", x.desc().ToString(), ", ", out_, " ",
                        y->desc().ToString());
    }
    if (x.ByteSize() > 0 && x.raw() != y->raw()) CopyBytes(x.raw(), y->raw(), x.ByteSize());
    return Status::OK();
  }

 private:
  const char* in_;
  const char* out_;
};

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_COPY_KERNEL_H_
