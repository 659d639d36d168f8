// CPU one_hot, gather (rows by index) and gather_grad (scatter-add into
// zeros). Every index is checked; a bad one fails the call with the op, the
// index, its flat position and the bound.
#include <algorithm>
#include <cstring>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

StatusOr<int64_t> CheckedIndex(KernelContext* ctx, const Blob& indices, int64_t position,
                               int64_t bound, const char* what) {
  const int64_t index = IndexAt(indices, position);
  if (index < 0 || index >= bound) {
    return ctx->Error("index ", index, " at position ", position, " is out of range [0, ", bound,
                      ") (", what, ")");
  }
  return index;
}

template <typename Out>
Status FillOneHot(KernelContext* ctx, const Blob& indices, Blob* out) {
  const int64_t depth = out->shape().dim(out->shape().rank() - 1);
  const Out on = static_cast<Out>(ctx->attrs().GetFloatOr("on_value", 1.0));
  const Out off = static_cast<Out>(ctx->attrs().GetFloatOr("off_value", 0.0));
  Out* o = out->data<Out>();
  std::fill(o, o + out->elem_count(), off);
  for (int64_t p = 0; p < indices.elem_count(); ++p) {
    ASSIGN_OR_RETURN(int64_t index, CheckedIndex(ctx, indices, p, depth, "depth"));
    o[p * depth + index] = on;
  }
  return Status::OK();
}

// Keyed by the indices' dtype; the output dtype comes from the attribute.
class OneHotKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& indices = ctx->Input("indices");
    Blob* out = ctx->Output("out");
    if (out->dtype() == DT_DOUBLE) return FillOneHot<double>(ctx, indices, out);
    return FillOneHot<float>(ctx, indices, out);
  }
};

// Elements per row of x (x.shape[1:]).
int64_t RowSize(const Shape& rows) {
  int64_t size = 1;
  for (int64_t i = 1; i < rows.rank(); ++i) size *= rows.dim(i);
  return size;
}

template <typename T>
class GatherKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const Blob& indices = ctx->Input("indices");
    const int64_t rows = x.shape().dim(0), row = RowSize(x.shape());
    Blob* out = ctx->Output("out");
    if (out->elem_count() != indices.elem_count() * row) {
      return ctx->Error("out ", out->shape(), " does not hold ", indices.elem_count(),
                        " rows of x ", x.shape());
    }
    T* o = out->data<T>();
    for (int64_t p = 0; p < indices.elem_count(); ++p) {
      ASSIGN_OR_RETURN(int64_t index, CheckedIndex(ctx, indices, p, rows, "rows of x"));
      if (row > 0) std::memcpy(o + p * row, x.data<T>() + index * row, row * sizeof(T));
    }
    return Status::OK();
  }
};

template <typename T>
class GatherGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& indices = ctx->Input("indices");
    const T* dy = ctx->Input("dy").data<T>();
    Blob* dx_blob = ctx->Output("dx");
    const int64_t rows = dx_blob->shape().dim(0), row = RowSize(dx_blob->shape());
    if (ctx->Input("dy").elem_count() != indices.elem_count() * row) {
      return ctx->Error("dy ", ctx->Input("dy").shape(), " does not hold ", indices.elem_count(),
                        " rows of dx ", dx_blob->shape());
    }
    T* dx = dx_blob->data<T>();
    std::fill(dx, dx + dx_blob->elem_count(), T(0));
    for (int64_t p = 0; p < indices.elem_count(); ++p) {
      ASSIGN_OR_RETURN(int64_t index, CheckedIndex(ctx, indices, p, rows, "rows of x"));
      T* target = dx + index * row;
      const T* grad = dy + p * row;
      for (int64_t d = 0; d < row; ++d) target[d] += grad[d];
    }
    return Status::OK();
  }
};

REGISTER_KERNEL("one_hot", DEVICE_CPU, DT_INT32, OneHotKernel);
REGISTER_KERNEL("one_hot", DEVICE_CPU, DT_INT64, OneHotKernel);
REGISTER_NN_CPU_KERNELS("gather", GatherKernel);
REGISTER_NN_CPU_KERNELS("gather_grad", GatherGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
