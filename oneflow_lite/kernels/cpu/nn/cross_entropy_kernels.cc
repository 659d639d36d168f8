// CPU kernels of sparse_softmax_cross_entropy and its grad (docs/ops.md).
//
// prediction [..., C] is read as rows x C, rows = the label's element count
// (any leading shape). Labels are validated in one pass before any row is
// computed, so a bad label is reported at its first position whatever the
// thread count.
//
// float32 rows run a vectorized softmax written with GCC vector extensions
// (16 lanes: four SSE2, two AVX2 or one AVX-512 register), compiled for
// baseline x86-64, AVX2 and AVX-512 and picked at load time
// (target_clones). Its exp is a Cody-Waite reduction and a degree-6
// polynomial (relative error below 1.5 ulp over the range used; exp of
// anything below -87 is 0). BUILD compiles this file without fused
// multiply-adds and every reduction keeps a fixed lane order, so all three
// versions give bit-identical results, as the vec library's loops do
// (kernels/cpu/vec/vec.h). float64 rows use std::exp: they serve the
// finite-difference gradient checks.
//
// Rows are split over the calling thread's OpenMP team sized to the
// cpu_threads setting (kernels/cpu/cpu_threads.h), as the oneDNN kernels do,
// once every thread gets at least kMinElementsPerThread elements; smaller
// calls stay on the stream thread. The result does not depend on the split.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

// Below this many elements per thread a row split costs more (the team's
// fork and join) than it saves: about 15 us of float32 softmax work. With
// it, nanoGPT's 768 x 65 logits already use two threads (53 -> 28 us).
constexpr int64_t kMinElementsPerThread = 16 * 1024;

// Calls fn(begin, end) on contiguous chunks covering [0, rows), on up to
// cpu_threads threads (see the file comment). Blocks until all are done.
template <typename Fn>
void ForRowChunks(int64_t rows, int64_t row_elements, const Fn& fn) {
  int64_t threads = CpuComputeThreadsSetting();
  if (threads <= 0) threads = omp_get_max_threads();
  threads = std::min({threads, rows, rows * row_elements / kMinElementsPerThread});
  if (threads <= 1) {
    fn(int64_t{0}, rows);
    return;
  }
  const int team_size = static_cast<int>(threads);
#pragma omp parallel num_threads(team_size)
  {
    const int64_t team = omp_get_num_threads(), t = omp_get_thread_num();
    fn(rows * t / team, rows * (t + 1) / team);
  }
}

// ---- float32 rows: vector extensions ----

constexpr int kLanes = 16;
typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t Ints __attribute__((vector_size(kLanes * sizeof(int32_t))));
typedef uint32_t Bits __attribute__((vector_size(kLanes * sizeof(uint32_t))));

inline Floats Splat(float v) { return Floats{} + v; }

inline Floats Load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void Store(float* p, Floats v) { std::memcpy(p, &v, sizeof(v)); }

// exp(x) for x <= 0 (a logit minus the row maximum); 0 below -87 and for
// -inf, NaN for NaN.
inline Floats ExpNonPositive(Floats x) {
  const Floats low = Splat(-87.0f);
  const Ints underflow = x < low;
  x = x < low ? low : x;
  // n = round(x / ln 2) by the 1.5 * 2^23 shifter; r = x - n ln 2 in two parts.
  const Floats shifter = Splat(12582912.0f);
  Floats n = x * 1.44269504088896341f + shifter;
  n = n - shifter;
  Floats r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Floats p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n (n in [-126, 0]) built from its exponent bits.
  const Bits bits = (reinterpret_cast<Bits>(__builtin_convertvector(n, Ints)) + 127u) << 23;
  Floats scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return underflow ? Splat(0.0f) : p * scale;
}

inline float LaneMax(Floats v) {
  float m = v[0];
  for (int l = 1; l < kLanes; ++l) m = v[l] > m ? v[l] : m;
  return m;
}

inline float LaneSum(Floats v) {
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += v[l];
  return s;
}

// p = softmax(x) over n >= 1 elements; returns the maximum and sets
// *log_sum = log(sum(exp(x - max))). The last n % 16 elements go through a
// padded block (padding -inf: it neither wins the max nor adds to the sum).
__attribute__((target_clones("default", "avx2", "avx512f"))) float SoftmaxRowFloat(
    const float* __restrict x, float* __restrict p, int64_t n, float* log_sum) {
  const int64_t full = n / kLanes * kLanes;
  float tail[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    tail[l] = full + l < n ? x[full + l] : -std::numeric_limits<float>::infinity();
  }
  Floats m = Load(tail);
  for (int64_t i = 0; i < full; i += kLanes) {
    const Floats v = Load(x + i);
    m = v > m ? v : m;
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
__attribute__((target_clones("default", "avx2", "avx512f"))) void XentGradRowFloat(
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
    ForRowChunks(size.rows, classes, [&](int64_t begin, int64_t end) {
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
    ForRowChunks(size.rows, classes, [&](int64_t begin, int64_t end) {
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
