// CPU layer_norm and layer_norm_grad over x viewed as [M, D].
//
// Backward, per row with xhat = (x - mean) * inv, g = dy * gamma:
//   dx = inv * (g - mean(g) - xhat * mean(g * xhat))
//        + dmean / D - dinv * inv^3 * (x - mean) / D
//   dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
//
// Rows are split over threads (kernels/cpu/parallel_rows.h); float32 rows
// run 16-lane vector code (float_lanes.h) cloned per instruction set, the
// same bits on each. dgamma and dbeta are summed per fixed block of rows
// (FixedBlocks), each block's partial sums added in block order, so no
// result depends on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cpu/nn/float_lanes.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

// ---- one row, forward ----

// out = (x - mean) * inv * gamma + beta over `cols` values; writes the row's
// mean and inv = 1 / sqrt(variance + epsilon).
template <typename T>
void NormRow(const T* in, const T* gamma, const T* beta, T* out, int64_t cols, T epsilon, T* mean,
             T* inv_variance) {
  T sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += in[c];
  const T mu = cols > 0 ? sum / T(cols) : T(0);
  T squares = 0;
  for (int64_t c = 0; c < cols; ++c) squares += (in[c] - mu) * (in[c] - mu);
  const T variance = cols > 0 ? squares / T(cols) : T(0);
  const T inv = T(1) / std::sqrt(variance + epsilon);
  *mean = mu;
  *inv_variance = inv;
  for (int64_t c = 0; c < cols; ++c) out[c] = (in[c] - mu) * inv * gamma[c] + beta[c];
}

// float32: 16-lane blocks (float_lanes.h); the last cols % 16 values, if
// any, form one more block padded with zeros.
OFLITE_CPU_CLONES void NormRowFloat(
    const float* __restrict in, const float* __restrict gamma, const float* __restrict beta,
    float* __restrict out, int64_t cols, float epsilon, float* mean, float* inv_variance) {
  using namespace lanes;  // NOLINT
  const int64_t full = cols / kLanes * kLanes, rest = cols - full;
  const Floats x_tail = rest > 0 ? LoadPartial(in + full, rest, 0.0f) : Splat(0.0f);
  Floats sums = x_tail;
  for (int64_t i = 0; i < full; i += kLanes) sums += Load(in + i);
  const float mu = cols > 0 ? LaneSum(sums) / static_cast<float>(cols) : 0.0f;
  const Floats centered_tail = Select(FirstLanes(rest), x_tail - mu, Splat(0.0f));
  Floats squares = centered_tail * centered_tail;
  for (int64_t i = 0; i < full; i += kLanes) {
    const Floats d = Load(in + i) - mu;
    squares += d * d;
  }
  const float variance = cols > 0 ? LaneSum(squares) / static_cast<float>(cols) : 0.0f;
  const float inv = 1.0f / std::sqrt(variance + epsilon);
  *mean = mu;
  *inv_variance = inv;
  for (int64_t i = 0; i < full; i += kLanes) {
    Store(out + i, (Load(in + i) - mu) * inv * Load(gamma + i) + Load(beta + i));
  }
  if (rest > 0) {
    StorePartial(out + full,
                 centered_tail * inv * LoadPartial(gamma + full, rest, 0.0f) +
                     LoadPartial(beta + full, rest, 0.0f),
                 rest);
  }
}

template <>
void NormRow<float>(const float* in, const float* gamma, const float* beta, float* out,
                    int64_t cols, float epsilon, float* mean, float* inv_variance) {
  NormRowFloat(in, gamma, beta, out, cols, epsilon, mean, inv_variance);
}

// ---- one row, backward ----

// What one row's gradient needs besides its values.
template <typename T>
struct GradRowArgs {
  T mu, inv;
  // dmean / D and -dinv * inv^3 / D (0 without those inputs).
  T extra_const, extra_slope;
};

// dx of one row (see the file comment); adds dy * xhat to dgamma and dy to
// dbeta (the row's block partials).
template <typename T>
void NormGradRow(const T* in, const T* g_out, const T* gamma, const GradRowArgs<T>& a, T* g_in,
                 T* dgamma, T* dbeta, int64_t cols) {
  T sum_g = 0, sum_g_xhat = 0;
  for (int64_t c = 0; c < cols; ++c) {
    const T xhat = (in[c] - a.mu) * a.inv;
    const T g = g_out[c] * gamma[c];
    sum_g += g;
    sum_g_xhat += g * xhat;
    dgamma[c] += g_out[c] * xhat;
    dbeta[c] += g_out[c];
  }
  const T mean_g = sum_g / T(cols), mean_g_xhat = sum_g_xhat / T(cols);
  for (int64_t c = 0; c < cols; ++c) {
    const T xhat = (in[c] - a.mu) * a.inv;
    g_in[c] = a.inv * (g_out[c] * gamma[c] - mean_g - xhat * mean_g_xhat) + a.extra_const +
              a.extra_slope * (in[c] - a.mu);
  }
}

// float32: 16-lane blocks; the last cols % 16 values, if any, form one more
// block whose padding holds dy = 0, gamma = 0 and xhat = 0.
OFLITE_CPU_CLONES void NormGradRowFloat(
    const float* __restrict in, const float* __restrict g_out, const float* __restrict gamma,
    const GradRowArgs<float>& a, float* __restrict g_in, float* __restrict dgamma,
    float* __restrict dbeta, int64_t cols) {
  using namespace lanes;  // NOLINT
  const int64_t full = cols / kLanes * kLanes, rest = cols - full;
  const float mu = a.mu, inv = a.inv;
  Floats x_tail = Splat(0.0f), dy_tail = Splat(0.0f), gamma_tail = Splat(0.0f);
  if (rest > 0) {
    x_tail = LoadPartial(in + full, rest, 0.0f);
    dy_tail = LoadPartial(g_out + full, rest, 0.0f);
    gamma_tail = LoadPartial(gamma + full, rest, 0.0f);
  }
  const Floats xhat_tail = Select(FirstLanes(rest), (x_tail - mu) * inv, Splat(0.0f));
  const Floats g_tail = dy_tail * gamma_tail;
  Floats sum_g = g_tail, sum_g_xhat = g_tail * xhat_tail;
  for (int64_t i = 0; i < full; i += kLanes) {
    const Floats dy = Load(g_out + i);
    const Floats xhat = (Load(in + i) - mu) * inv;
    const Floats g = dy * Load(gamma + i);
    sum_g += g;
    sum_g_xhat += g * xhat;
    Store(dgamma + i, Load(dgamma + i) + dy * xhat);
    Store(dbeta + i, Load(dbeta + i) + dy);
  }
  const float mean_g = LaneSum(sum_g) / static_cast<float>(cols);
  const float mean_g_xhat = LaneSum(sum_g_xhat) / static_cast<float>(cols);
  for (int64_t i = 0; i < full; i += kLanes) {
    const Floats x = Load(in + i);
    const Floats xhat = (x - mu) * inv;
    const Floats g = Load(g_out + i) * Load(gamma + i);
    Store(g_in + i,
          inv * (g - mean_g - xhat * mean_g_xhat) + a.extra_const + a.extra_slope * (x - mu));
  }
  if (rest > 0) {
    StorePartial(dgamma + full, LoadPartial(dgamma + full, rest, 0.0f) + dy_tail * xhat_tail, rest);
    StorePartial(dbeta + full, LoadPartial(dbeta + full, rest, 0.0f) + dy_tail, rest);
    StorePartial(g_in + full,
                 inv * (g_tail - mean_g - xhat_tail * mean_g_xhat) + a.extra_const +
                     a.extra_slope * (x_tail - mu),
                 rest);
  }
}

template <>
void NormGradRow<float>(const float* in, const float* g_out, const float* gamma,
                        const GradRowArgs<float>& a, float* g_in, float* dgamma, float* dbeta,
                        int64_t cols) {
  NormGradRowFloat(in, g_out, gamma, a, g_in, dgamma, dbeta, cols);
}

// ---- kernels ----

class LayerNormKernelBase : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(begin_, BeginNormAxis(ctx));
    epsilon_ = ctx.attrs().GetFloatOr("epsilon", 1e-5);
    return Status::OK();
  }

 protected:
  int64_t Rows(const Shape& x) const { return x.Count(0, begin_); }
  int64_t Cols(const Shape& x) const { return x.Count(begin_); }

  int64_t begin_ = 0;
  double epsilon_ = 1e-5;
};

template <typename T>
class LayerNormKernel final : public LayerNormKernelBase {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& x_blob = ctx->Input("x");
    const int64_t rows = Rows(x_blob.shape()), cols = Cols(x_blob.shape());
    const T* x = x_blob.data<T>();
    const T* gamma = ctx->Input("gamma").data<T>();
    const T* beta = ctx->Input("beta").data<T>();
    T* y = ctx->Output("y")->data<T>();
    T* mean = ctx->Output("mean")->data<T>();
    T* inv_variance = ctx->Output("inv_variance")->data<T>();
    const T epsilon = static_cast<T>(epsilon_);
    ParallelRows(rows, cols, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        NormRow<T>(x + r * cols, gamma, beta, y + r * cols, cols, epsilon, mean + r,
                   inv_variance + r);
      }
    });
    return Status::OK();
  }
};

template <typename T>
class LayerNormGradKernel final : public LayerNormKernelBase {
 public:
  Status Forward(KernelContext* ctx) override {
    const Shape& x_shape = ctx->Input("x").shape();
    const int64_t rows = Rows(x_shape), cols = Cols(x_shape);
    const NormGradBlobs<T> b = NormGradBlobsOf<T>(ctx);
    const FixedBlocks blocks{rows};
    // Per block: its dgamma partial, then its dbeta partial.
    partials_.assign(blocks.count() * 2 * cols, T(0));
    ParallelRows(blocks.count(), FixedBlocks::kRowsPerBlock * cols,
                 [&](int64_t first, int64_t last) {
                   for (int64_t k = first; k < last; ++k) GradBlock(b, blocks, k, cols);
                 });
    std::fill(b.dgamma, b.dgamma + cols, T(0));
    std::fill(b.dbeta, b.dbeta + cols, T(0));
    for (int64_t k = 0; k < blocks.count(); ++k) {
      const T* dgamma = partials_.data() + k * 2 * cols;
      const T* dbeta = dgamma + cols;
      for (int64_t c = 0; c < cols; ++c) b.dgamma[c] += dgamma[c];
      for (int64_t c = 0; c < cols; ++c) b.dbeta[c] += dbeta[c];
    }
    return Status::OK();
  }

 private:
  void GradBlock(const NormGradBlobs<T>& b, const FixedBlocks& blocks, int64_t block,
                 int64_t cols) {
    T* dgamma = partials_.data() + block * 2 * cols;
    T* dbeta = dgamma + cols;
    for (int64_t r = blocks.begin(block); r < blocks.end(block); ++r) {
      GradRowArgs<T> a;
      a.mu = b.mean[r];
      a.inv = b.inv_variance[r];
      a.extra_const = b.dmean != nullptr ? b.dmean[r] / T(cols) : T(0);
      a.extra_slope =
          b.dinv_variance != nullptr ? -b.dinv_variance[r] * a.inv * a.inv * a.inv / T(cols) : T(0);
      const int64_t offset = r * cols;
      NormGradRow<T>(b.x + offset, b.dy + offset, b.gamma, a, b.dx + offset, dgamma, dbeta, cols);
    }
  }

  // The blocks' partial sums (kept between calls: no allocation once sized).
  std::vector<T> partials_;
};

REGISTER_NN_CPU_KERNELS("layer_norm", LayerNormKernel);
REGISTER_NN_CPU_KERNELS("layer_norm_grad", LayerNormGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
