// CopyKernel: copies the bytes of one input blob to one output blob of the
// same byte size (identity, reshape, reshape_like, flatten; any dtype).
// Stateless; returns an error naming the op if the sizes differ.
#ifndef ONEFLOW_LITE_KERNELS_CPU_MATH_COPY_KERNEL_H_
#define ONEFLOW_LITE_KERNELS_CPU_MATH_COPY_KERNEL_H_

#include <cstring>

#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace math {

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
    if (x.ByteSize() > 0 && x.raw() != y->raw()) std::memcpy(y->raw(), x.raw(), x.ByteSize());
    return Status::OK();
  }

 private:
  const char* in_;
  const char* out_;
};

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_COPY_KERNEL_H_
