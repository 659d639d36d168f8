// CPU kernels for the layout ops: reshape, reshape_like, flatten (byte
// copies), transpose, concat, slice and slice_grad. Kernels read extents from
// the bound blobs, so they run unchanged on split (physical) shapes. The
// copies and transpose split their work over threads
// (kernels/cpu/parallel_rows.h); each output element is written once, so
// results do not depend on the thread count.
#include <algorithm>
#include <cstring>

#include "oneflow_lite/kernels/cpu/math/copy_kernel.h"
#include "oneflow_lite/kernels/cpu/math/strided_loop.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

class ReshapeKernel final : public CopyKernel {
 public:
  ReshapeKernel() : CopyKernel("x", "y") {}
};

// Copies n elements from `in` (stride in_stride) to contiguous `out`.
template <typename T>
void GatherRow(const T* in, int64_t in_stride, T* out, int64_t n) {
  if (in_stride == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i * in_stride];
  }
}

template <typename T>
class TransposeKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    auto perm_or = ctx->attrs().GetInts("perm");
    if (!perm_or.ok()) return ctx->Error(perm_or.status().message());
    const std::vector<int64_t>& perm = *perm_or;
    const Shape& in = x.shape();
    bool valid = static_cast<int64_t>(perm.size()) == in.rank() && y->shape().rank() == in.rank();
    for (size_t j = 0; valid && j < perm.size(); ++j) {
      valid = perm[j] >= 0 && perm[j] < in.rank() && y->shape().dim(j) == in.dim(perm[j]);
    }
    if (!valid) {
      return ctx->Error("blob shapes disagree with perm ", Shape(perm), ": x ", in, ", y ",
                        y->shape());
    }
    const std::vector<int64_t> in_strides = ContiguousStrides(in);
    std::vector<int64_t> read_strides(perm.size());
    for (size_t j = 0; j < perm.size(); ++j) read_strides[j] = in_strides[perm[j]];
    StridedLoop loop(y->shape().dims(), {ContiguousStrides(y->shape()), read_strides});
    const T* src = x.data<T>();
    T* dst = y->data<T>();
    const int64_t stride = loop.InnerStride(1);
    if (stride == 1 || loop.empty() || loop.dims().size() < 2) {
      CopyRuns(loop, src, dst);
      return Status::OK();
    }
    TiledTranspose(loop, src, dst);
    return Status::OK();
  }

 private:
  // Each output run reads x with one stride: contiguous runs (a perm that
  // keeps the last axis, e.g. (0, 2, 1, 3) over heads) are block copies.
  // Runs are split over threads (kernels/cpu/parallel_rows.h).
  static void CopyRuns(const StridedLoop& loop, const T* src, T* dst) {
    const int64_t stride = loop.InnerStride(1);
    const std::vector<int64_t>& dims = loop.dims();
    if (stride == 1 && dims.size() >= 2) {
      CopyRunBlocks(loop, src, dst);
      return;
    }
    const int64_t run = dims.empty() ? 1 : dims.back();
    ParallelRows(loop.RowCount(), run, [&](int64_t first, int64_t last) {
      loop.ForEachRowIn(first, last, [&](const int64_t* offsets, int64_t n) {
        GatherRow(src + offsets[1], stride, dst + offsets[0], n);
      });
    });
  }

  // Contiguous runs of n elements, `count` of them along the next outer axis
  // (x stride in_step, y stride out_step): one block of memcpys per index
  // of the axes further out.
  static void CopyRunBlocks(const StridedLoop& loop, const T* src, T* dst) {
    const std::vector<int64_t>& dims = loop.dims();
    const size_t rank = dims.size();
    const int64_t n = dims[rank - 1], count = dims[rank - 2];
    const int64_t out_step = loop.strides(0)[rank - 2], in_step = loop.strides(1)[rank - 2];
    const std::vector<int64_t> outer_dims(dims.begin(), dims.end() - 2);
    const StridedLoop outer(
        outer_dims, {std::vector<int64_t>(loop.strides(0).begin(), loop.strides(0).end() - 2),
                     std::vector<int64_t>(loop.strides(1).begin(), loop.strides(1).end() - 2)});
    const int64_t outer_run = outer.dims().empty() ? 1 : outer.dims().back();
    ParallelRows(outer.RowCount(), outer_run * count * n, [&](int64_t first, int64_t last) {
      outer.ForEachRowIn(first, last, [&](const int64_t* offsets, int64_t blocks) {
        for (int64_t k = 0; k < blocks; ++k) {
          T* out = dst + offsets[0] + k * outer.InnerStride(0);
          const T* in = src + offsets[1] + k * outer.InnerStride(1);
          for (int64_t t = 0; t < count; ++t) {
            std::memcpy(out + t * out_step, in + t * in_step, n * sizeof(T));
          }
        }
      });
    });
  }

  // The output's inner axis reads x with a stride; some other axis reads x
  // contiguously. Copy in tiles over those two axes (CopyTransposedTiles,
  // strided_loop.h) so that both the reads and the writes of a tile stay in
  // cache.
  static void TiledTranspose(const StridedLoop& loop, const T* src, T* dst) {
    const std::vector<int64_t>& dims = loop.dims();
    const std::vector<int64_t>& out_strides = loop.strides(0);
    const std::vector<int64_t>& in_strides = loop.strides(1);
    const size_t inner = dims.size() - 1;
    size_t contiguous = inner;
    for (size_t i = 0; i < inner; ++i) {
      if (in_strides[i] == 1) contiguous = i;
    }
    if (contiguous == inner) {  // no axis reads x contiguously: plain strided copy
      CopyRuns(loop, src, dst);
      return;
    }
    const int64_t rows = dims[contiguous], cols = dims[inner];
    const int64_t out_row_stride = out_strides[contiguous], in_col_stride = in_strides[inner];
    std::vector<int64_t> outer_dims = dims;
    outer_dims[contiguous] = outer_dims[inner] = 1;
    StridedLoop outer(outer_dims, {out_strides, in_strides});
    const int64_t outer_run = outer.dims().empty() ? 1 : outer.dims().back();
    ParallelRows(outer.RowCount(), outer_run * rows * cols, [&](int64_t first, int64_t last) {
      outer.ForEachRowIn(first, last, [&](const int64_t* offsets, int64_t count) {
        for (int64_t k = 0; k < count; ++k) {
          CopyTransposedTiles(src + offsets[1] + k * outer.InnerStride(1), in_col_stride,
                              dst + offsets[0] + k * outer.InnerStride(0), out_row_stride, rows,
                              cols);
        }
      });
    });
  }
};

// Concatenation = for each outer index, each input's contiguous block.
class ConcatKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    Blob* out = ctx->Output("out");
    const Shape& shape = out->shape();
    int64_t axis = 0;
    if (!NormalizeAxis(ctx->attrs().GetIntOr("axis", 0), shape.rank(), &axis)) {
      return ctx->Error("axis out of range for out ", shape);
    }
    const int64_t outer = shape.Count(0, axis);
    const int64_t inner = shape.Count(axis + 1);
    const int64_t elem = SizeOf(out->dtype());
    const int64_t out_row = shape.dim(axis) * inner * elem;
    int64_t offset = 0, total = 0;
    for (int k = 0; k < ctx->InputCount("in"); ++k) total += ctx->Input("in", k).elem_count();
    if (total != out->elem_count()) {
      return ctx->Error("input blobs hold ", total, " elements, out ", shape, " needs ",
                        out->elem_count());
    }
    char* dst = static_cast<char*>(out->raw());
    for (int k = 0; k < ctx->InputCount("in"); ++k) {
      const Blob& in = ctx->Input("in", k);
      if (in.shape().rank() != shape.rank()) {
        return ctx->Error("in[", k, "] ", in.shape(), " does not match out ", shape);
      }
      const int64_t row = in.shape().dim(axis) * inner * elem;
      const char* src = static_cast<const char*>(in.raw());
      for (int64_t o = 0; o < outer && row > 0; ++o) {
        std::memcpy(dst + o * out_row + offset, src + o * row, row);
      }
      offset += row;
    }
    return Status::OK();
  }
};

// Strides that read (slice) or write (slice_grad) the sliced elements of a
// tensor of shape `full`, and the offset of the first one.
void SliceAddressing(const SliceSpec& spec, const Shape& full, std::vector<int64_t>* strides,
                     int64_t* base) {
  const std::vector<int64_t> contiguous = ContiguousStrides(full);
  strides->resize(full.rank());
  *base = 0;
  for (int64_t i = 0; i < full.rank(); ++i) {
    (*strides)[i] = contiguous[i] * spec.step[i];
    *base += contiguous[i] * spec.start[i];
  }
}

template <typename T>
class SliceKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    auto spec_or = NormalizeSlice(ctx->op(), x.shape());
    if (!spec_or.ok()) return spec_or.status();
    if (spec_or->out_shape != y->shape()) {
      return ctx->Error("slice of x ", x.shape(), " is ", spec_or->out_shape, ", y is ",
                        y->shape());
    }
    std::vector<int64_t> strides;
    int64_t base = 0;
    SliceAddressing(*spec_or, x.shape(), &strides, &base);
    StridedLoop loop(y->shape().dims(), {ContiguousStrides(y->shape()), strides});
    const T* src = x.data<T>() + base;
    T* dst = y->data<T>();
    const int64_t stride = loop.InnerStride(1);
    loop.ForEachRow([&](const int64_t* offsets, int64_t n) {
      GatherRow(src + offsets[1], stride, dst + offsets[0], n);
    });
    return Status::OK();
  }
};

template <typename T>
class SliceGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& dy = ctx->Input("dy");
    const Blob& like = ctx->Input("like");
    Blob* dx = ctx->Output("dx");
    auto spec_or = NormalizeSlice(ctx->op(), like.shape());
    if (!spec_or.ok()) return spec_or.status();
    if (spec_or->out_shape != dy.shape() || dx->shape() != like.shape()) {
      return ctx->Error("slice of like ", like.shape(), " is ", spec_or->out_shape, ", dy is ",
                        dy.shape(), ", dx is ", dx->shape());
    }
    T* dst = dx->data<T>();
    std::fill_n(dst, dx->elem_count(), T(0));
    std::vector<int64_t> strides;
    int64_t base = 0;
    SliceAddressing(*spec_or, like.shape(), &strides, &base);
    StridedLoop loop(dy.shape().dims(), {ContiguousStrides(dy.shape()), strides});
    const T* src = dy.data<T>();
    const int64_t stride = loop.InnerStride(1);
    loop.ForEachRow([&](const int64_t* offsets, int64_t n) {
      const T* s = src + offsets[0];
      T* d = dst + base + offsets[1];
      if (stride == 1) {
        for (int64_t i = 0; i < n; ++i) d[i] = s[i];
      } else {
        for (int64_t i = 0; i < n; ++i) d[i * stride] = s[i];
      }
    });
    return Status::OK();
  }
};

#define OFLITE_MATH_ALL_TYPES(op, Kernel)                     \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_FLOAT, Kernel<float>);   \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_DOUBLE, Kernel<double>); \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_INT32, Kernel<int32_t>); \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_INT64, Kernel<int64_t>)

#define OFLITE_MATH_ALL_TYPES_UNTYPED(op, Kernel)     \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_FLOAT, Kernel);  \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_DOUBLE, Kernel); \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_INT32, Kernel);  \
  REGISTER_KERNEL(op, DEVICE_CPU, DT_INT64, Kernel)

OFLITE_MATH_ALL_TYPES_UNTYPED("reshape", ReshapeKernel);
OFLITE_MATH_ALL_TYPES_UNTYPED("reshape_like", ReshapeKernel);
OFLITE_MATH_ALL_TYPES_UNTYPED("flatten", ReshapeKernel);
OFLITE_MATH_ALL_TYPES_UNTYPED("concat", ConcatKernel);
OFLITE_MATH_ALL_TYPES("transpose", TransposeKernel);
OFLITE_MATH_ALL_TYPES("slice", SliceKernel);
OFLITE_MATH_ALL_TYPES("slice_grad", SliceGradKernel);

}  // namespace
}  // namespace math
}  // namespace oflite
