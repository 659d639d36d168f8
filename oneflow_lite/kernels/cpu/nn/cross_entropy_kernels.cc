// CPU kernels of sparse_softmax_cross_entropy and its grad (docs/ops.md).
//
// prediction [..., C] is read as rows x C, rows = the label's element count
// (any leading shape). Labels are validated in one pass before any row is
// computed, so a bad label is reported at its first position whatever the
// thread count.
//
// float32 rows run a vectorized softmax written with the 16-lane vector
// extensions of float_lanes.h, compiled for baseline x86-64, AVX2 and
// AVX-512 and picked at load time (target_clones); all three give the same
// bits (see float_lanes.h). Exp of anything below -87 is 0. float64 rows use
// std::exp: they serve the finite-difference gradient checks.
//
// Rows are split over threads by ParallelRows (kernels/cpu/parallel_rows.h):
// with nanoGPT's 768 x 65 logits two threads already pay (53 -> 28 us). The
// result does not depend on the split.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cpu/nn/float_lanes.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

// ---- float32 rows: vector extensions (float_lanes.h) ----

using lanes::ExpNonPositive;
using lanes::Floats;
using lanes::Greater;
using lanes::kLanes;
using lanes::LaneMax;
using lanes::LaneSum;
using lanes::Load;
using lanes::Select;
using lanes::Splat;
using lanes::Store;

// p = softmax(x) over n >= 1 elements; returns the maximum and sets
// *log_sum = log(sum(exp(x - max))). The last n % 16 elements go through a
// padded block (padding -inf: it neither wins the max nor adds to the sum).
OFLITE_CPU_CLONES float SoftmaxRowFloat(
    const float* __restrict x, float* __restrict p, int64_t n, float* log_sum) {
  const int64_t full = n / kLanes * kLanes;
  float tail[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    tail[l] = full + l < n ? x[full + l] : -std::numeric_limits<float>::infinity();
  }
  Floats m = Load(tail);
  for (int64_t i = 0; i < full; i += kLanes) {
    const Floats v = Load(x + i);
    m = Select(Greater(v, m), v, m);
  }
  const float max_value = LaneMax(m);
  const Floats shift = Splat(max_value);
  Floats e = ExpNonPositive(Load(tail) - shift);
  Floats sums = e;
  Store(tail, e);
  for (int64_t i = 0; i < full; i += kLanes) {
    e = ExpNonPositive(Load(x + i) - shift);
    Store(p + i, e);
    sums += e;
  }
  const float sum = LaneSum(sums);
  const float inv = 1.0f / sum;
  const Floats scale = Splat(inv);
  for (int64_t i = 0; i < full; i += kLanes) Store(p + i, Load(p + i) * scale);
  for (int64_t i = full; i < n; ++i) p[i] = tail[i - full] * inv;
  *log_sum = std::log(sum);
  return max_value;
}

// g = dy (p - onehot(target)) [+ p (dp - sum(dp p)) when dp is given].
OFLITE_CPU_CLONES void XentGradRowFloat(
    const float* __restrict p, const float* __restrict dp, float dy, int64_t target,
    float* __restrict g, int64_t n) {
  if (dp == nullptr) {
    for (int64_t c = 0; c < n; ++c) g[c] = dy * p[c];
  } else {
    const int64_t full = n / kLanes * kLanes;
    Floats dots = Splat(0.0f);
    for (int64_t i = 0; i < full; i += kLanes) dots += Load(dp + i) * Load(p + i);
    float dot = LaneSum(dots);
    for (int64_t c = full; c < n; ++c) dot += dp[c] * p[c];
    for (int64_t c = 0; c < n; ++c) g[c] = dy * p[c] + p[c] * (dp[c] - dot);
  }
  g[target] -= dy;
}

// ---- float64 rows: the plain reference ----

double SoftmaxRowDouble(const double* x, double* p, int64_t n, double* log_sum) {
  const double max_value = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += (p[c] = std::exp(x[c] - max_value));
  const double inv = 1.0 / sum;
  for (int64_t c = 0; c < n; ++c) p[c] *= inv;
  *log_sum = std::log(sum);
  return max_value;
}

void XentGradRowDouble(const double* p, const double* dp, double dy, int64_t target, double* g,
                       int64_t n) {
  for (int64_t c = 0; c < n; ++c) g[c] = dy * p[c];
  if (dp != nullptr) {
    double dot = 0;
    for (int64_t c = 0; c < n; ++c) dot += dp[c] * p[c];
    for (int64_t c = 0; c < n; ++c) g[c] += p[c] * (dp[c] - dot);
  }
  g[target] -= dy;
}

template <typename T>
T SoftmaxRow(const T* x, T* p, int64_t n, T* log_sum) {
  if constexpr (std::is_same_v<T, float>) {
    return SoftmaxRowFloat(x, p, n, log_sum);
  } else {
    return SoftmaxRowDouble(x, p, n, log_sum);
  }
}

template <typename T>
void XentGradRow(const T* p, const T* dp, T dy, int64_t target, T* g, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    XentGradRowFloat(p, dp, dy, target, g, n);
  } else {
    XentGradRowDouble(p, dp, dy, target, g, n);
  }
}

// ---- shapes and labels ----

// rows x classes of a [..., C] blob whose leading dims hold `label`'s
// elements.
struct RowsAndClasses {
  int64_t rows = 0, classes = 0;
};

StatusOr<RowsAndClasses> RowsOf(const KernelContext& ctx, const char* arg, const Blob& classes_blob,
                                const Blob& label) {
  const Shape& shape = classes_blob.shape();
  if (shape.rank() < 1 || shape.dim(shape.rank() - 1) == 0 ||
      classes_blob.elem_count() != label.elem_count() * shape.dim(shape.rank() - 1)) {
    return ctx.Error(arg, " ", shape, " is not [..., C] over label ", label.shape());
  }
  if (label.dtype() != DT_INT32 && label.dtype() != DT_INT64) {
    return ctx.Error("label must be int32 or int64, got ", DataTypeName(label.dtype()));
  }
  return RowsAndClasses{label.elem_count(), shape.dim(shape.rank() - 1)};
}

// " (index [i, j, ...])" for position `flat` of `shape` when its rank is
// at least 2, else "".
std::string MultiIndex(const Shape& shape, int64_t flat) {
  if (shape.rank() < 2) return "";
  std::vector<int64_t> index(shape.rank());
  for (int64_t axis = shape.rank() - 1; axis >= 0; --axis) {
    index[axis] = flat % shape.dim(axis);
    flat /= shape.dim(axis);
  }
  std::ostringstream text;
  text << " (index [";
  for (size_t i = 0; i < index.size(); ++i) text << (i ? ", " : "") << index[i];
  text << "])";
  return text.str();
}

template <typename L>
Status CheckLabelsOfType(const KernelContext& ctx, const Blob& label, int64_t classes) {
  const L* labels = label.data<L>();
  for (int64_t n = 0; n < label.elem_count(); ++n) {
    if (labels[n] < 0 || labels[n] >= classes) {
      return ctx.Error("label ", static_cast<int64_t>(labels[n]), " at position ", n,
                       MultiIndex(label.shape(), n), " is out of range [0, ", classes, ")");
    }
  }
  return Status::OK();
}

Status CheckLabels(const KernelContext& ctx, const Blob& label, int64_t classes) {
  return label.dtype() == DT_INT32 ? CheckLabelsOfType<int32_t>(ctx, label, classes)
                                   : CheckLabelsOfType<int64_t>(ctx, label, classes);
}

// ---- kernels ----

// prob = softmax(prediction); out = logsumexp(prediction) - prediction[label]
// per row, from the max-shifted values.
template <typename T>
class SparseSoftmaxCrossEntropyKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& prediction = ctx->Input("prediction");
    const Blob& label = ctx->Input("label");
    ASSIGN_OR_RETURN(RowsAndClasses size, RowsOf(*ctx, "prediction", prediction, label));
    RETURN_IF_ERROR(CheckLabels(*ctx, label, size.classes));
    const T* x = prediction.data<T>();
    T* prob = ctx->Output("prob")->data<T>();
    T* out = ctx->Output("out")->data<T>();
    const int64_t classes = size.classes;
    ParallelRows(size.rows, classes, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const T* row = x + n * classes;
        T log_sum;
        const T max_value = SoftmaxRow(row, prob + n * classes, classes, &log_sum);
        out[n] = log_sum - (row[IndexAt(label, n)] - max_value);
      }
    });
    return Status::OK();
  }
};

// dx = dy * (prob - onehot(label)) [+ prob * (dprob - sum(dprob * prob))].
template <typename T>
class SparseSoftmaxCrossEntropyGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& prob_blob = ctx->Input("prob");
    const Blob& label = ctx->Input("label");
    const Blob& dy_blob = ctx->Input("dy");
    ASSIGN_OR_RETURN(RowsAndClasses size, RowsOf(*ctx, "prob", prob_blob, label));
    if (dy_blob.elem_count() != size.rows) {
      return ctx->Error("dy ", dy_blob.shape(), " does not match label ", label.shape());
    }
    RETURN_IF_ERROR(CheckLabels(*ctx, label, size.classes));
    const T* prob = prob_blob.data<T>();
    const T* dy = dy_blob.data<T>();
    const T* dprob = ctx->HasInput("dprob") ? ctx->Input("dprob").data<T>() : nullptr;
    T* dx = ctx->Output("dx")->data<T>();
    const int64_t classes = size.classes;
    ParallelRows(size.rows, classes, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t offset = n * classes;
        XentGradRow(prob + offset, dprob == nullptr ? nullptr : dprob + offset, dy[n],
                    IndexAt(label, n), dx + offset, classes);
      }
    });
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("sparse_softmax_cross_entropy", SparseSoftmaxCrossEntropyKernel);
REGISTER_NN_CPU_KERNELS("sparse_softmax_cross_entropy_grad", SparseSoftmaxCrossEntropyGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
