// CPU batch_norm and batch_norm_grad (float32/float64; sums in double).
// x is viewed as [N, C, S] (S = product of the dims after the channel), so
// channel c's m = N * S elements are x[n, c, s]. Formulas: the header
// comment of oneflow_lite/ops/nn/batch_norm_ops.cc.
#include <cmath>
#include <vector>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

struct ChannelView {
  int64_t n = 0, c = 0, s = 1;
  int64_t Count() const { return n * s; }
  int64_t Offset(int64_t batch, int64_t channel) const { return (batch * c + channel) * s; }
};

ChannelView ViewOf(const Shape& x) {
  ChannelView v;
  v.n = x.dim(0);
  v.c = x.dim(1);
  for (int64_t i = 2; i < x.rank(); ++i) v.s *= x.dim(i);
  return v;
}

// Calls fn(offset, count) for every contiguous run of channel `channel`.
template <typename Fn>
void ForChannel(const ChannelView& v, int64_t channel, Fn&& fn) {
  for (int64_t b = 0; b < v.n; ++b) fn(v.Offset(b, channel), v.s);
}

template <typename T>
class BatchNormKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    training_ = ctx.attrs().GetBoolOr("training", true);
    epsilon_ = ctx.attrs().GetFloatOr("epsilon", 1e-5);
    momentum_ = ctx.attrs().GetFloatOr("momentum", 0.9);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    const ChannelView v = ViewOf(x.shape());
    if (ctx->Input("gamma").elem_count() != v.c || ctx->Output("y")->shape() != x.shape()) {
      return ctx->Error("blob shapes disagree: x ", x.shape(), ", gamma ",
                        ctx->Input("gamma").shape(), ", y ", ctx->Output("y")->shape());
    }
    T* mean = ctx->Output("mean")->data<T>();
    T* inv = ctx->Output("inv_variance")->data<T>();
    T* moving_mean = ctx->MutableInput("moving_mean")->data<T>();
    T* moving_var = ctx->MutableInput("moving_variance")->data<T>();
    for (int64_t c = 0; c < v.c; ++c) {
      if (training_) {
        TrainingStatistics(x.data<T>(), v, c, &mean[c], &inv[c], &moving_mean[c], &moving_var[c]);
      } else {
        mean[c] = moving_mean[c];
        inv[c] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(moving_var[c]) + epsilon_));
      }
    }
    Normalize(ctx, x.data<T>(), v, mean, inv);
    return Status::OK();
  }

 private:
  void TrainingStatistics(const T* x, const ChannelView& v, int64_t c, T* mean, T* inv,
                          T* moving_mean, T* moving_var) const {
    const int64_t m = v.Count();
    double sum = 0;
    ForChannel(v, c, [&](int64_t off, int64_t k) {
      for (int64_t i = 0; i < k; ++i) sum += x[off + i];
    });
    const double mu = sum / static_cast<double>(m);  // NaN when m == 0
    double squares = 0;
    ForChannel(v, c, [&](int64_t off, int64_t k) {
      for (int64_t i = 0; i < k; ++i) squares += (x[off + i] - mu) * (x[off + i] - mu);
    });
    const double var = squares / static_cast<double>(m);
    *mean = static_cast<T>(mu);
    *inv = static_cast<T>(1.0 / std::sqrt(var + epsilon_));
    if (m == 0) return;
    const double unbiased = m > 1 ? var * m / (m - 1) : var;
    *moving_mean = static_cast<T>(momentum_ * *moving_mean + (1 - momentum_) * mu);
    *moving_var = static_cast<T>(momentum_ * *moving_var + (1 - momentum_) * unbiased);
  }

  void Normalize(KernelContext* ctx, const T* x, const ChannelView& v, const T* mean,
                 const T* inv) const {
    const T* gamma = ctx->Input("gamma").data<T>();
    const T* beta = ctx->Input("beta").data<T>();
    T* y = ctx->Output("y")->data<T>();
    for (int64_t c = 0; c < v.c; ++c) {
      const T scale = inv[c] * gamma[c];
      const T shift = beta[c] - mean[c] * scale;
      ForChannel(v, c, [&](int64_t off, int64_t k) {
        for (int64_t i = 0; i < k; ++i) y[off + i] = x[off + i] * scale + shift;
      });
    }
  }

  bool training_ = true;
  double epsilon_ = 1e-5;
  double momentum_ = 0.9;
};

template <typename T>
class BatchNormGradKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    training_ = ctx.attrs().GetBoolOr("training", true);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& x_blob = ctx->Input("x");
    const ChannelView v = ViewOf(x_blob.shape());
    if (ctx->Input("dy").shape() != x_blob.shape() || ctx->Input("gamma").elem_count() != v.c) {
      return ctx->Error("blob shapes disagree: dy ", ctx->Input("dy").shape(), ", x ",
                        x_blob.shape(), ", gamma ", ctx->Input("gamma").shape());
    }
    const NormGradBlobs<T> blobs = NormGradBlobsOf<T>(ctx);
    for (int64_t c = 0; c < v.c; ++c) {
      Channel(blobs, v, c, blobs.dmean ? double(blobs.dmean[c]) : 0.0,
              blobs.dinv_variance ? double(blobs.dinv_variance[c]) : 0.0);
    }
    return Status::OK();
  }

 private:
  void Channel(const NormGradBlobs<T>& b, const ChannelView& v, int64_t c, double dmean,
               double dinv) const {
    const T* dy = b.dy;
    const T* x = b.x;
    const double mean = b.mean[c];
    const double inv = b.inv_variance[c];
    const double gamma = b.gamma[c];
    double dbeta = 0, dgamma = 0;
    ForChannel(v, c, [&](int64_t off, int64_t k) {
      for (int64_t i = 0; i < k; ++i) {
        dbeta += dy[off + i];
        dgamma += dy[off + i] * (x[off + i] - mean) * inv;
      }
    });
    b.dbeta[c] = static_cast<T>(dbeta);
    b.dgamma[c] = static_cast<T>(dgamma);
    T* dx = b.dx;
    const double m = static_cast<double>(v.Count());
    ForChannel(v, c, [&](int64_t off, int64_t k) {
      for (int64_t i = 0; i < k; ++i) {
        const double xhat = (x[off + i] - mean) * inv;
        double g = gamma * inv * dy[off + i];
        if (training_) {
          g = gamma * inv / m * (m * dy[off + i] - dbeta - xhat * dgamma) + dmean / m -
              dinv * inv * inv * xhat / m;
        }
        dx[off + i] = static_cast<T>(g);
      }
    });
  }

  bool training_ = true;
};

REGISTER_NN_CPU_KERNELS("batch_norm", BatchNormKernel);
REGISTER_NN_CPU_KERNELS("batch_norm_grad", BatchNormGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
