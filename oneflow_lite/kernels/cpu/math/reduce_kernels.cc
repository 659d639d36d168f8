// CPU kernels for reduce_sum, reduce_mean and broadcast_like.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "oneflow_lite/kernels/cpu/math/strided_loop.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/cpu/vec/vec.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

// The sum of p[0, n) in double (keeps long float32 sums accurate), in four
// interleaved partial sums: four independent add chains instead of one, so
// the adds overlap (a conv bias gradient sums rows of H*W elements).
template <typename T>
double SumRow(const T* p, int64_t n) {
  double partial[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int lane = 0; lane < 4; ++lane) partial[lane] += p[i + lane];
  }
  for (; i < n; ++i) partial[0] += p[i];
  return (partial[0] + partial[1]) + (partial[2] + partial[3]);
}

// y = sum (or mean) of x over `axis` (empty = all). Walks x once; each inner
// run either accumulates into one output element (reduced inner axis) or
// adds a contiguous row (kept inner axis). Reducing leading axes ([rows,
// cols] -> [cols], a dense layer's bias gradient) sums blocks of rows on
// threads; other reductions (an NCHW bias gradient, [N, C, H, W] -> [C])
// split the output over threads, so each output element is summed by one
// thread in the one-thread order.
template <typename T, bool kMean>
class ReduceKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    Blob* y = ctx->Output("y");
    const Shape& shape = x.shape();
    auto axes_or = NormalizeAxes(ctx->attrs().GetIntsOr("axis", {}), shape.rank(), true, "");
    if (!axes_or.ok()) return ctx->Error(axes_or.status().message());
    const std::vector<int64_t>& axes = *axes_or;
    std::vector<int64_t> kept_dims = shape.dims();
    int64_t count = 1;
    for (int64_t axis : axes) {
      count *= shape.dim(axis);
      kept_dims[axis] = 1;
    }
    const Shape kept(kept_dims);
    if (kept.elem_count() != y->elem_count()) {
      return ctx->Error("blob shapes disagree: x ", shape, ", y ", y->shape());
    }
    T* out = y->data<T>();
    std::fill_n(out, y->elem_count(), T(0));
    const T* in = x.data<T>();
    if (IsLeadingPrefix(axes) && kept.elem_count() > 1) {
      SumLeadingRows(in, out, shape.Count(0, axes.size()), kept.elem_count());
    } else {
      SumStrided(in, out, shape, kept, axes);
    }
    if (kMean) {
      const T scale = count > 0 ? T(1) / static_cast<T>(count) : T(0);
      const int64_t m = y->elem_count();
      if (count == 0) {
        std::fill_n(out, m, std::numeric_limits<T>::quiet_NaN());
      } else {
        for (int64_t i = 0; i < m; ++i) out[i] *= scale;
      }
    }
    return Status::OK();
  }

 private:
  // Whether the reduced axes are 0, 1, ..., k - 1 (x read as [rows, cols],
  // y as [cols]: a bias gradient).
  static bool IsLeadingPrefix(const std::vector<int64_t>& axes) {
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] != static_cast<int64_t>(i)) return false;
    }
    return !axes.empty();
  }

  // out[c] = sum over rows of in[r, c]: each fixed block of rows
  // (FixedBlocks) summed in row order into its own partial row, blocks split
  // over threads (kernels/cpu/parallel_rows.h), the partials then added in
  // block order: the same bits for any thread count. One block (up to
  // kRowsPerBlock rows) sums straight into out.
  void SumLeadingRows(const T* in, T* out, int64_t rows, int64_t cols) {
    const FixedBlocks blocks{rows};
    if (blocks.count() <= 1) {
      for (int64_t r = 0; r < rows; ++r) AddRow(in + r * cols, out, cols);
      return;
    }
    partials_.assign(blocks.count() * cols, T(0));
    ParallelRows(blocks.count(), FixedBlocks::kRowsPerBlock * cols,
                 [&](int64_t first, int64_t last) {
                   for (int64_t k = first; k < last; ++k) {
                     T* partial = partials_.data() + k * cols;
                     for (int64_t r = blocks.begin(k); r < blocks.end(k); ++r) {
                       AddRow(in + r * cols, partial, cols);
                     }
                   }
                 });
    for (int64_t k = 0; k < blocks.count(); ++k) AddRow(partials_.data() + k * cols, out, cols);
  }

  static void AddRow(const T* p, T* o, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      vec::Active().add_into(p, o, n);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] += p[i];
    }
  }

  // The strided walk, its output split over threads: along the outermost
  // kept axis (of the loop's merged axes) other than the inner run, each
  // thread walking x in the one-thread order restricted to its range of
  // that axis; else, when only the inner run is kept, its columns. Either
  // way every output element receives its terms from one thread in the
  // one-thread order, so the thread count changes no bit. A full reduction
  // (one output element) stays on one thread.
  static void SumStrided(const T* in, T* out, const Shape& shape, const Shape& kept,
                         const std::vector<int64_t>& axes) {
    std::vector<int64_t> out_strides = ContiguousStrides(kept);
    for (int64_t axis : axes) out_strides[axis] = 0;
    const StridedLoop loop(shape.dims(), {ContiguousStrides(shape), out_strides});
    if (loop.empty()) return;  // no terms: y stays 0
    const std::vector<int64_t>& dims = loop.dims();
    const int64_t rank = static_cast<int64_t>(dims.size());
    const int64_t inner = rank > 0 ? dims[rank - 1] : 1;
    const int64_t runs = loop.RowCount();
    int64_t split = -1;
    for (int64_t axis = 0; axis + 1 < rank && split < 0; ++axis) {
      if (loop.strides(1)[axis] != 0) split = axis;
    }
    const int64_t split_size = split >= 0 ? dims[split] : 1;
    if (split >= 0 && RowThreads(split_size, runs / split_size * inner) > 1) {
      // Index i of the split axis owns y[i * stride, (i + 1) * stride) (it
      // is the outermost kept axis). Each thread sums its share into a
      // buffer of its own, then copies it out: threads adding to
      // neighbouring elements of one cache line (an NCHW bias gradient's
      // few channels) would fight over that line on every add.
      const int64_t in_stride = loop.strides(0)[split], stride = loop.strides(1)[split];
      ParallelRows(split_size, runs / split_size * inner, [&](int64_t first, int64_t last) {
        // The same walk over indices [first, last) of the split axis. No
        // new merges: x is contiguous, and a shorter axis is contiguous
        // with neither neighbour, so the inner run stays the same.
        std::vector<int64_t> part = dims;
        part[split] = last - first;
        const StridedLoop share(part, {loop.strides(0), loop.strides(1)});
        std::vector<T> sums((last - first) * stride, T(0));
        AddRuns(share, in + first * in_stride, sums.data(), 0, share.RowCount(), 0, inner);
        std::copy(sums.begin(), sums.end(), out + first * stride);
      });
    } else if (split < 0 && rank > 0 && loop.InnerStride(1) != 0) {
      ParallelElements(
          inner,
          [&](int64_t begin, int64_t end) { AddRuns(loop, in, out, 0, runs, begin, end); },
          runs);
    } else {
      AddRuns(loop, in, out, 0, runs, 0, inner);
    }
  }

  // Runs [first, last) of `loop` (x's and y's strides), columns [begin, end)
  // of each (a column range only where y's inner stride is not 0): each
  // inner run is summed into its one output element (in double), or added
  // to its output row.
  static void AddRuns(const StridedLoop& loop, const T* in, T* out, int64_t first, int64_t last,
                      int64_t begin, int64_t end) {
    const int64_t out_stride = loop.InnerStride(1);
    const int64_t n = end - begin;
    in += begin;
    out += begin * out_stride;
    loop.ForEachRowIn(first, last, [&](const int64_t* offsets, int64_t) {
      const T* p = in + offsets[0];
      T* o = out + offsets[1];
      if (out_stride == 0) {
        *o += static_cast<T>(SumRow(p, n));
      } else if constexpr (std::is_same_v<T, float>) {
        if (out_stride == 1) {
          vec::Active().add_into(p, o, n);  // e.g. a bias gradient: rows summed
        } else {
          for (int64_t i = 0; i < n; ++i) o[i] += p[i];
        }
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] += p[i];
      }
    });
  }

  // Per block of rows, its partial sums (kept between calls: no allocation
  // once sized).
  std::vector<T> partials_;
};

// y (like's shape) = x broadcast along the listed axes.
template <typename T>
class BroadcastLikeKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const Blob& like = ctx->Input("like");
    Blob* y = ctx->Output("y");
    const Shape& shape = like.shape();
    auto axes_or = NormalizeAxes(ctx->attrs().GetIntsOr("axis", {}), shape.rank(), false, "");
    std::vector<int64_t> x_axis_of;
    if (!axes_or.ok() || !BroadcastLikeAxisMap(x.shape(), shape, *axes_or, &x_axis_of) ||
        y->shape() != shape) {
      return ctx->Error("cannot broadcast x ", x.shape(), " to like ", shape, " (y ", y->shape(),
                        ")");
    }
    const std::vector<int64_t> x_contiguous = ContiguousStrides(x.shape());
    std::vector<int64_t> x_strides(shape.rank(), 0);
    for (int64_t i = 0; i < shape.rank(); ++i) {
      if (x_axis_of[i] >= 0) x_strides[i] = x_contiguous[x_axis_of[i]];
    }
    const StridedLoop loop(shape.dims(), {ContiguousStrides(shape), x_strides});
    const T* in = x.data<T>();
    T* out = y->data<T>();
    const int64_t runs = loop.RowCount();
    const int64_t inner = loop.dims().empty() ? 1 : loop.dims().back();
    // Every output element is written once: any split of the runs (or of
    // one run's columns) over threads gives the same bits.
    if (runs == 1) {
      ParallelElements(inner, [&](int64_t begin, int64_t end) {
        CopyRuns(loop, in, out, 0, 1, begin, end);
      });
    } else {
      ParallelRows(runs, inner, [&](int64_t first, int64_t last) {
        CopyRuns(loop, in, out, first, last, 0, inner);
      });
    }
    return Status::OK();
  }

 private:
  // Runs [first, last) of `loop` (y's and x's strides), columns [begin, end)
  // of each.
  static void CopyRuns(const StridedLoop& loop, const T* in, T* out, int64_t first, int64_t last,
                       int64_t begin, int64_t end) {
    const int64_t in_stride = loop.InnerStride(1);
    const int64_t n = end - begin;
    loop.ForEachRowIn(first, last, [&](const int64_t* offsets, int64_t) {
      T* o = out + offsets[0] + begin;
      const T* p = in + offsets[1] + begin * in_stride;
      if (in_stride == 0) {
        const T v = *p;
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else if (in_stride == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = p[i];
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = p[i * in_stride];
      }
    });
  }
};

REGISTER_KERNEL("reduce_sum", DEVICE_CPU, DT_FLOAT, ReduceKernel<float, false>);
REGISTER_KERNEL("reduce_sum", DEVICE_CPU, DT_DOUBLE, ReduceKernel<double, false>);
REGISTER_KERNEL("reduce_mean", DEVICE_CPU, DT_FLOAT, ReduceKernel<float, true>);
REGISTER_KERNEL("reduce_mean", DEVICE_CPU, DT_DOUBLE, ReduceKernel<double, true>);
REGISTER_KERNEL("broadcast_like", DEVICE_CPU, DT_FLOAT, BroadcastLikeKernel<float>);
REGISTER_KERNEL("broadcast_like", DEVICE_CPU, DT_DOUBLE, BroadcastLikeKernel<double>);

}  // namespace
}  // namespace math
}  // namespace oflite
