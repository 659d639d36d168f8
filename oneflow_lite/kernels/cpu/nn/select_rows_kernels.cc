// CPU kernel of select_rows (ops/nn/select_rows_ops.cc): copies the rows of
// x whose mask is not zero, in order, and sets y's actual shape [K, ...]
// (y is dynamic; its register holds up to N rows).
#include <cstring>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

class SelectRowsKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const Blob& mask = ctx->Input("mask");
    Blob* y = ctx->Output("y");
    const int64_t rows = x.shape().rank() > 0 ? x.shape().dim(0) : 0;
    if (mask.elem_count() != rows) {
      return ctx->Error("mask has ", mask.elem_count(), " elements for ", rows, " rows of x");
    }
    const int64_t row_bytes = rows > 0 ? x.ByteSize() / rows : 0;
    const char* in = static_cast<const char*>(x.raw());
    char* out = static_cast<char*>(y->raw());
    int64_t kept = 0;
    for (int64_t row = 0; row < rows; ++row) {
      if (!MaskKeepsRow(mask.raw(), mask.dtype(), row)) continue;
      if (row_bytes > 0) std::memcpy(out + kept * row_bytes, in + row * row_bytes, row_bytes);
      ++kept;
    }
    Shape shape = x.shape();
    if (shape.rank() > 0) shape.mutable_dim(0) = kept;
    y->set_shape(shape);
    return Status::OK();
  }
};

REGISTER_KERNEL("select_rows", DEVICE_CPU, DT_FLOAT, SelectRowsKernel);
REGISTER_KERNEL("select_rows", DEVICE_CPU, DT_DOUBLE, SelectRowsKernel);
REGISTER_KERNEL("select_rows", DEVICE_CPU, DT_INT32, SelectRowsKernel);
REGISTER_KERNEL("select_rows", DEVICE_CPU, DT_INT64, SelectRowsKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
