// CPU layer_norm and layer_norm_grad over x viewed as [M, D].
//
// Backward, per row with xhat = (x - mean) * inv, g = dy * gamma:
//   dx = inv * (g - mean(g) - xhat * mean(g * xhat))
//        + dmean / D - dinv * inv^3 * (x - mean) / D
//   dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
#include <cmath>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

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
    for (int64_t r = 0; r < rows; ++r) {
      const T* in = x + r * cols;
      T* out = y + r * cols;
      T sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += in[c];
      const T mu = cols > 0 ? sum / T(cols) : T(0);
      T squares = 0;
      for (int64_t c = 0; c < cols; ++c) squares += (in[c] - mu) * (in[c] - mu);
      const T variance = cols > 0 ? squares / T(cols) : T(0);
      const T inv = T(1) / std::sqrt(variance + T(epsilon_));
      mean[r] = mu;
      inv_variance[r] = inv;
      for (int64_t c = 0; c < cols; ++c) out[c] = (in[c] - mu) * inv * gamma[c] + beta[c];
    }
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
    std::fill(b.dgamma, b.dgamma + cols, T(0));
    std::fill(b.dbeta, b.dbeta + cols, T(0));
    for (int64_t r = 0; r < rows; ++r) {
      const T* in = b.x + r * cols;
      const T* g_out = b.dy + r * cols;
      T* g_in = b.dx + r * cols;
      const T mu = b.mean[r], inv = b.inv_variance[r];
      T sum_g = 0, sum_g_xhat = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const T xhat = (in[c] - mu) * inv;
        const T g = g_out[c] * b.gamma[c];
        sum_g += g;
        sum_g_xhat += g * xhat;
        b.dgamma[c] += g_out[c] * xhat;
        b.dbeta[c] += g_out[c];
      }
      const T mean_g = sum_g / T(cols), mean_g_xhat = sum_g_xhat / T(cols);
      const T extra_const = b.dmean != nullptr ? b.dmean[r] / T(cols) : T(0);
      const T extra_slope =
          b.dinv_variance != nullptr ? -b.dinv_variance[r] * inv * inv * inv / T(cols) : T(0);
      for (int64_t c = 0; c < cols; ++c) {
        const T xhat = (in[c] - mu) * inv;
        g_in[c] = inv * (g_out[c] * b.gamma[c] - mean_g - xhat * mean_g_xhat) + extra_const +
                  extra_slope * (in[c] - mu);
      }
    }
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("layer_norm", LayerNormKernel);
REGISTER_NN_CPU_KERNELS("layer_norm_grad", LayerNormGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
