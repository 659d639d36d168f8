// CPU batch_norm and batch_norm_grad (float32/float64).
// x is viewed as [N, C, S] (S = product of the dims after the channel), so
// channel c's m = N * S elements are x[n, c, s]: N runs of S contiguous
// values. Formulas: the header comment of oneflow_lite/ops/nn/batch_norm_ops.cc.
//
// float32: every channel is cut into the same fixed blocks of about
// kBlockElems values (whole runs, or pieces of one long run; the cut depends
// on N and S alone). A block is summed in 16 float lanes (float_lanes.h):
//   forward: its sum, then, while it is still in the L1 cache, the sum of
//     (x - block mean) and of its squares (the corrected two-pass algorithm),
//     giving the block's mean and centered sum of squares M2 without the
//     cancellation of a sum-of-squares formula;
//   backward: sum dy and sum dy * (x - mean) in one pass.
// The blocks' results are then combined in double in block order (forward:
// Chan's pairwise update of mean and M2), so x is read once from memory for
// the statistics, the float error stays that of ~kBlockElems / 16 additions
// per lane, and the results do not depend on which thread summed a block.
// y and dx are a second pass.
//
// Threads (kernels/cpu/parallel_rows.h): whole channels per thread when the
// channels divide evenly and rows are long (statistics and the second pass
// then run while the channel is in the thread's cache); otherwise (block,
// channel) pairs over threads in block-major order (each thread a range of
// batch rows), a serial per-channel combine, then the second pass over the
// pairs (SplitByChannel). Both do the same arithmetic in the same order, so
// the bits do not depend on the thread count. The vector code is cloned per instruction set
// (target_clones) and compiled without fused multiply-adds (nn/BUILD), the same bits on each.
//
// float64 keeps the plain two-pass path in double, whole channels per thread.
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

// ---- the fixed blocks of a channel ----

// Values per block, about (at most kBlockElems + S < 2 kBlockElems when a
// block is whole runs): 8 KiB of float32, so the second look at a block in
// the forward pass hits L1, and 128 float additions per lane.
constexpr int64_t kBlockElems = 2048;

// Block b of a channel: runs [n0, n1), values [s0, s1) of each.
struct Span {
  int64_t n0, n1, s0, s1;
  int64_t Count() const { return (n1 - n0) * (s1 - s0); }
};

// Blocks of nearly equal size (the last may be shorter), so that threads
// taking equal numbers of blocks get equal work.
struct BlockPlan {
  ChannelView v;
  int64_t runs_per_block = 1;  // S <= kBlockElems: whole runs per block
  int64_t pieces_per_run = 1;  // S > kBlockElems: blocks per run,
  int64_t piece = 0;           // each `piece` values (whole lanes) but the last
  int64_t per_channel = 0;     // blocks per channel

  explicit BlockPlan(const ChannelView& view) : v(view) {
    if (v.s > kBlockElems) {
      pieces_per_run = Ceil(v.s, kBlockElems);
      piece = Ceil(Ceil(v.s, pieces_per_run), lanes::kLanes) * lanes::kLanes;
      per_channel = v.n * pieces_per_run;
    } else if (v.n > 0) {
      const int64_t blocks = std::max<int64_t>(1, Ceil(v.n * v.s, kBlockElems));
      runs_per_block = Ceil(v.n, blocks);
      per_channel = Ceil(v.n, runs_per_block);
    }
  }

  Span Block(int64_t b) const {
    if (pieces_per_run > 1) {
      const int64_t n = b / pieces_per_run, k = b % pieces_per_run;
      return {n, n + 1, k * piece, std::min(v.s, (k + 1) * piece)};
    }
    return {b * runs_per_block, std::min(v.n, (b + 1) * runs_per_block), 0, v.s};
  }

  static int64_t Ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }
};

// Where a block lies in x (and dy, y, dx: same layout): `runs` runs of `len`
// values, `stride` apart, the first at `offset`; `total` values in the blob
// (a masked tail load may read past a run's end while inside the blob).
struct BlockAt {
  int64_t offset, runs, len, stride, total;
};

BlockAt Locate(const BlockPlan& plan, int64_t channel, const Span& span) {
  return {plan.v.Offset(span.n0, channel) + span.s0, span.n1 - span.n0, span.s1 - span.s0,
          plan.v.c * plan.v.s, plan.v.n * plan.v.c * plan.v.s};
}

// ---- float32 block loops ----

// p[0, count) (count < kLanes) in the first lanes, `fill` in the others:
// one masked load when the 16 values lie inside the blob, else through a
// buffer.
inline __attribute__((always_inline)) lanes::Floats LoadTail(const float* p, int64_t count,
                                                             float fill, const float* end) {
  return p + lanes::kLanes <= end ? lanes::LoadMasked(p, count, fill)
                                  : lanes::LoadPartial(p, count, fill);
}

// One block's mean and M2 (sum of squared deviations from that mean).
struct BlockMoments {
  double mean, m2;
};

OFLITE_CPU_CLONES BlockMoments MomentsBlockFloat(
    const float* __restrict x, BlockAt at) {
  using namespace lanes;  // NOLINT
  const float* end = x + at.total;
  const int64_t full = at.len / kLanes * kLanes, rest = at.len - full;
  // Two accumulators (pairs of vectors) so that consecutive additions do
  // not wait on each other; the tail vector goes to the first.
  const int64_t pairs = at.len / (2 * kLanes) * (2 * kLanes);
  Floats sums0 = Splat(0.0f), sums1 = Splat(0.0f);
  for (int64_t r = 0; r < at.runs; ++r) {
    const float* p = x + at.offset + r * at.stride;
    for (int64_t i = 0; i < pairs; i += 2 * kLanes) {
      sums0 += Load(p + i);
      sums1 += Load(p + i + kLanes);
    }
    if (pairs < full) sums0 += Load(p + pairs);
    if (rest > 0) sums0 += LoadTail(p + full, rest, 0.0f, end);
  }
  const int64_t count = at.runs * at.len;
  const float center = LaneSum(sums0 + sums1) / static_cast<float>(count);
  // Second look, from L1: deviations from the float mean and their squares.
  Floats deviations0 = Splat(0.0f), squares0 = Splat(0.0f);
  Floats deviations1 = Splat(0.0f), squares1 = Splat(0.0f);
  const Ints tail_lanes = FirstLanes(rest);
  for (int64_t r = 0; r < at.runs; ++r) {
    const float* p = x + at.offset + r * at.stride;
    for (int64_t i = 0; i < pairs; i += 2 * kLanes) {
      const Floats d0 = Load(p + i) - center, d1 = Load(p + i + kLanes) - center;
      deviations0 += d0;
      squares0 += d0 * d0;
      deviations1 += d1;
      squares1 += d1 * d1;
    }
    if (pairs < full) {
      const Floats d = Load(p + pairs) - center;
      deviations0 += d;
      squares0 += d * d;
    }
    if (rest > 0) {
      const Floats d =
          Select(tail_lanes, LoadTail(p + full, rest, center, end) - center, Splat(0.0f));
      deviations0 += d;
      squares0 += d * d;
    }
  }
  // Corrected two-pass: the float mean's own error, removed in double.
  const double shift =
      static_cast<double>(LaneSum(deviations0 + deviations1)) / static_cast<double>(count);
  const double m2 = static_cast<double>(LaneSum(squares0 + squares1)) - shift * shift * count;
  return {center + shift, std::max(m2, 0.0)};
}

// y = (x - mean) * scale + beta over one block.
OFLITE_CPU_CLONES void NormalizeBlockFloat(
    const float* __restrict x, float* __restrict y, BlockAt at, float mean, float scale,
    float beta) {
  using namespace lanes;  // NOLINT
  const int64_t full = at.len / kLanes * kLanes;
  for (int64_t r = 0; r < at.runs; ++r) {
    const int64_t off = at.offset + r * at.stride;
    const float* in = x + off;
    float* out = y + off;
    for (int64_t i = 0; i < full; i += kLanes) Store(out + i, (Load(in + i) - mean) * scale + beta);
    // The same operations per value as the lanes: the same bits.
    for (int64_t i = full; i < at.len; ++i) out[i] = (in[i] - mean) * scale + beta;
  }
}

// One block's sum of dy and of dy * (x - mean).
struct BlockGradSums {
  double dy, dy_centered;
};

OFLITE_CPU_CLONES BlockGradSums GradSumsBlockFloat(
    const float* __restrict x, const float* __restrict dy, BlockAt at, float mean) {
  using namespace lanes;  // NOLINT
  const float* x_end = x + at.total;
  const float* dy_end = dy + at.total;
  const int64_t full = at.len / kLanes * kLanes, rest = at.len - full;
  const Ints tail_lanes = FirstLanes(rest);
  Floats sum_dy = Splat(0.0f), sum_dy_centered = Splat(0.0f);
  for (int64_t r = 0; r < at.runs; ++r) {
    const int64_t off = at.offset + r * at.stride;
    for (int64_t i = 0; i < full; i += kLanes) {
      const Floats g = Load(dy + off + i);
      sum_dy += g;
      sum_dy_centered += g * (Load(x + off + i) - mean);
    }
    if (rest > 0) {
      const Floats g = LoadTail(dy + off + full, rest, 0.0f, dy_end);
      const Floats d = LoadTail(x + off + full, rest, mean, x_end) - mean;
      sum_dy += g;
      sum_dy_centered += Select(tail_lanes, g * d, Splat(0.0f));
    }
  }
  return {LaneSum(sum_dy), LaneSum(sum_dy_centered)};
}

// dx = a * dy + b * (x - mean) + k over one block (training), a * dy
// (inference: b and k unused).
struct GradCoefficients {
  float a, b, k;
};

OFLITE_CPU_CLONES void DxBlockFloat(
    const float* __restrict x, const float* __restrict dy, float* __restrict dx, BlockAt at,
    float mean, GradCoefficients c, bool training) {
  using namespace lanes;  // NOLINT
  const int64_t full = at.len / kLanes * kLanes;
  for (int64_t r = 0; r < at.runs; ++r) {
    const int64_t off = at.offset + r * at.stride;
    const float* in = x + off;
    const float* g = dy + off;
    float* out = dx + off;
    if (training) {
      for (int64_t i = 0; i < full; i += kLanes) {
        Store(out + i, Load(g + i) * c.a + (Load(in + i) - mean) * c.b + c.k);
      }
      for (int64_t i = full; i < at.len; ++i) out[i] = g[i] * c.a + (in[i] - mean) * c.b + c.k;
    } else {
      for (int64_t i = 0; i < full; i += kLanes) Store(out + i, Load(g + i) * c.a);
      for (int64_t i = full; i < at.len; ++i) out[i] = g[i] * c.a;
    }
  }
}

// ---- combining blocks (double, block order) ----

// Chan et al.'s pairwise update: the count, mean and M2 of the blocks so far.
struct Moments {
  double count = 0, mean = 0, m2 = 0;

  void Add(double n, const BlockMoments& b) {
    if (n == 0) return;
    const double total = count + n, delta = b.mean - mean;
    mean += delta * (n / total);
    m2 += b.m2 + delta * delta * (count * n / total);
    count = total;
  }
};

// How the threads share the work: whole channels each, or (block, channel)
// pairs in block-major order, so that each thread covers a contiguous range
// of batch rows. Channels are the better split where they divide evenly
// (or are many) and each thread's channels fill at least 1024 values of a
// batch row; with less, the cache lines at the channel boundaries of every
// row, which two threads write, cost more than the split saves (two
// threads over one, by channels / by blocks: [128, 16, 7, 7] 1.13x / 1.68x,
// [1024, 2, 7, 7] 0.77x / 1.69x, [64, 64, 7, 7] 2.0x / 1.6x; cpu_kernel_bench).
bool SplitByChannel(const ChannelView& v, int64_t work_per_value) {
  const int threads = RowThreads(v.c, v.Count() * work_per_value);
  return threads <= 1 ||
         (v.c * v.s >= 1024 * threads && (v.c % threads == 0 || v.c >= 8 * threads));
}

// ---- kernels ----

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
    Args a;
    a.x = x.data<T>();
    a.gamma = ctx->Input("gamma").data<T>();
    a.beta = ctx->Input("beta").data<T>();
    a.y = ctx->Output("y")->data<T>();
    a.mean = ctx->Output("mean")->data<T>();
    a.inv = ctx->Output("inv_variance")->data<T>();
    a.moving_mean = ctx->MutableInput("moving_mean")->data<T>();
    a.moving_var = ctx->MutableInput("moving_variance")->data<T>();
    Run(v, a);
    return Status::OK();
  }

 private:
  struct Args {
    const T *x, *gamma, *beta;
    T *y, *mean, *inv, *moving_mean, *moving_var;
  };

  void Run(const ChannelView& v, const Args& a);

  // Channel c's outputs from its mean and biased variance (training) and
  // the running statistics' update; m = 0 gives NaN and no update.
  void Finish(const Args& a, int64_t c, double m, double mu, double var) const {
    a.mean[c] = static_cast<T>(mu);
    a.inv[c] = static_cast<T>(1.0 / std::sqrt(var + epsilon_));
    if (m == 0) return;
    const double unbiased = m > 1 ? var * m / (m - 1) : var;
    a.moving_mean[c] = static_cast<T>(momentum_ * a.moving_mean[c] + (1 - momentum_) * mu);
    a.moving_var[c] = static_cast<T>(momentum_ * a.moving_var[c] + (1 - momentum_) * unbiased);
  }

  void Inference(const Args& a, int64_t c) const {
    a.mean[c] = a.moving_mean[c];
    a.inv[c] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(a.moving_var[c]) + epsilon_));
  }

  // float64: two passes in double over the channel, then y.
  void DoubleChannel(const ChannelView& v, const Args& a, int64_t c) const {
    const int64_t m = v.Count();
    if (training_) {
      double sum = 0;
      for (int64_t b = 0; b < v.n; ++b) {
        const T* x = a.x + v.Offset(b, c);
        for (int64_t i = 0; i < v.s; ++i) sum += x[i];
      }
      const double mu = sum / static_cast<double>(m);  // NaN when m == 0
      double squares = 0;
      for (int64_t b = 0; b < v.n; ++b) {
        const T* x = a.x + v.Offset(b, c);
        for (int64_t i = 0; i < v.s; ++i) squares += (x[i] - mu) * (x[i] - mu);
      }
      Finish(a, c, static_cast<double>(m), mu, squares / static_cast<double>(m));
    } else {
      Inference(a, c);
    }
    const T mean = a.mean[c], scale = a.inv[c] * a.gamma[c], beta = a.beta[c];
    for (int64_t b = 0; b < v.n; ++b) {
      const int64_t off = v.Offset(b, c);
      for (int64_t i = 0; i < v.s; ++i) a.y[off + i] = (a.x[off + i] - mean) * scale + beta;
    }
  }

  void NormalizeFloat(const BlockPlan& plan, const Args& a, int64_t c, int64_t b) const {
    const float scale = a.inv[c] * a.gamma[c];
    NormalizeBlockFloat(a.x, a.y, Locate(plan, c, plan.Block(b)), a.mean[c], scale, a.beta[c]);
  }

  void FinishFloat(const Args& a, int64_t c, const Moments& moments) const {
    Finish(a, c, moments.count, moments.count > 0 ? moments.mean : NAN,
           moments.count > 0 ? moments.m2 / moments.count : NAN);
  }

  bool training_ = true;
  double epsilon_ = 1e-5;
  double momentum_ = 0.9;
  // Per block of the block split: its moments (kept: no allocation once sized).
  std::vector<BlockMoments> partials_;
};

template <>
void BatchNormKernel<double>::Run(const ChannelView& v, const Args& a) {
  ParallelRows(v.c, 3 * v.Count(), [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) DoubleChannel(v, a, c);
  });
}

template <>
void BatchNormKernel<float>::Run(const ChannelView& v, const Args& a) {
  const BlockPlan plan(v);
  const int64_t blocks = plan.per_channel;
  // The statistics of channel c: its blocks' moments in block order.
  auto block_moments = [&](int64_t c, int64_t b) {
    return MomentsBlockFloat(a.x, Locate(plan, c, plan.Block(b)));
  };
  if (SplitByChannel(v, training_ ? 2 : 1)) {
    ParallelRows(v.c, (training_ ? 2 : 1) * v.Count(), [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        if (training_) {
          Moments moments;
          for (int64_t b = 0; b < blocks; ++b) {
            moments.Add(plan.Block(b).Count(), block_moments(c, b));
          }
          FinishFloat(a, c, moments);
        } else {
          Inference(a, c);
        }
        for (int64_t b = 0; b < blocks; ++b) NormalizeFloat(plan, a, c, b);
      }
    });
    return;
  }
  // Pair i is block i / C of channel i % C.
  const int64_t pairs = v.c * blocks;
  const int64_t pair_work = plan.Block(0).Count();
  if (training_) {
    partials_.resize(static_cast<size_t>(pairs));
    ParallelRows(pairs, pair_work, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) partials_[i] = block_moments(i % v.c, i / v.c);
    });
    for (int64_t c = 0; c < v.c; ++c) {
      Moments moments;
      for (int64_t b = 0; b < blocks; ++b) {
        moments.Add(plan.Block(b).Count(), partials_[b * v.c + c]);
      }
      FinishFloat(a, c, moments);
    }
  } else {
    for (int64_t c = 0; c < v.c; ++c) Inference(a, c);
  }
  ParallelRows(pairs, pair_work, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) NormalizeFloat(plan, a, i % v.c, i / v.c);
  });
}

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
    Run(v, NormGradBlobsOf<T>(ctx));
    return Status::OK();
  }

 private:
  void Run(const ChannelView& v, const NormGradBlobs<T>& b);

  // dx's coefficients for channel c from its sums (see DxBlockFloat):
  //   dx = gamma inv / m (m dy - dbeta - xhat dgamma) + dmean / m
  //        - dinv inv^2 xhat / m,  xhat = (x - mean) inv,
  // which is a dy + b (x - mean) + k with a = gamma inv,
  // b = -(gamma dgamma + dinv inv) inv^2 / m, k = (dmean - gamma inv dbeta) / m.
  GradCoefficients Coefficients(const NormGradBlobs<T>& g, int64_t c, double m, double dbeta,
                                double dgamma) const {
    const double inv = g.inv_variance[c], gamma = g.gamma[c];
    const double dmean = g.dmean ? double(g.dmean[c]) : 0.0;
    const double dinv = g.dinv_variance ? double(g.dinv_variance[c]) : 0.0;
    GradCoefficients k;
    k.a = static_cast<float>(gamma * inv);
    k.b = static_cast<float>(-(gamma * dgamma + dinv * inv) * inv * inv / m);
    k.k = static_cast<float>((dmean - gamma * inv * dbeta) / m);
    return k;
  }

  // float64: the sums in double, then dx per value.
  void DoubleChannel(const NormGradBlobs<T>& g, const ChannelView& v, int64_t c) const {
    const double mean = g.mean[c], inv = g.inv_variance[c], gamma = g.gamma[c];
    const double dmean = g.dmean ? double(g.dmean[c]) : 0.0;
    const double dinv = g.dinv_variance ? double(g.dinv_variance[c]) : 0.0;
    double dbeta = 0, dgamma = 0;
    for (int64_t n = 0; n < v.n; ++n) {
      const int64_t off = v.Offset(n, c);
      for (int64_t i = 0; i < v.s; ++i) {
        dbeta += g.dy[off + i];
        dgamma += g.dy[off + i] * (g.x[off + i] - mean) * inv;
      }
    }
    g.dbeta[c] = static_cast<T>(dbeta);
    g.dgamma[c] = static_cast<T>(dgamma);
    const double m = static_cast<double>(v.Count());
    for (int64_t n = 0; n < v.n; ++n) {
      const int64_t off = v.Offset(n, c);
      for (int64_t i = 0; i < v.s; ++i) {
        const double dy = g.dy[off + i], xhat = (g.x[off + i] - mean) * inv;
        g.dx[off + i] =
            static_cast<T>(training_ ? gamma * inv / m * (m * dy - dbeta - xhat * dgamma) +
                                           dmean / m - dinv * inv * inv * xhat / m
                                     : gamma * inv * dy);
      }
    }
  }

  // float32, channel c once its blocks' sums are combined.
  GradCoefficients FinishFloat(const NormGradBlobs<T>& g, const ChannelView& v, int64_t c,
                               double dbeta, double dy_centered) const {
    // An empty channel has dgamma 0 whatever inv_variance is (NaN there).
    const double dgamma =
        v.Count() > 0 ? dy_centered * static_cast<double>(g.inv_variance[c]) : 0.0;
    g.dbeta[c] = static_cast<T>(dbeta);
    g.dgamma[c] = static_cast<T>(dgamma);
    return Coefficients(g, c, static_cast<double>(v.Count()), dbeta, dgamma);
  }

  bool training_ = true;
  // The block split's per-block sums and per-channel coefficients (kept).
  std::vector<BlockGradSums> partials_;
  std::vector<GradCoefficients> coefficients_;
};

template <>
void BatchNormGradKernel<double>::Run(const ChannelView& v, const NormGradBlobs<double>& g) {
  ParallelRows(v.c, 3 * v.Count(), [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) DoubleChannel(g, v, c);
  });
}

template <>
void BatchNormGradKernel<float>::Run(const ChannelView& v, const NormGradBlobs<float>& g) {
  const BlockPlan plan(v);
  const int64_t blocks = plan.per_channel;
  auto sums = [&](int64_t c, int64_t b) {
    return GradSumsBlockFloat(g.x, g.dy, Locate(plan, c, plan.Block(b)), g.mean[c]);
  };
  auto dx = [&](int64_t c, int64_t b, const GradCoefficients& k) {
    DxBlockFloat(g.x, g.dy, g.dx, Locate(plan, c, plan.Block(b)), g.mean[c], k, training_);
  };
  if (SplitByChannel(v, 3)) {
    ParallelRows(v.c, 3 * v.Count(), [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        double dbeta = 0, dy_centered = 0;
        for (int64_t b = 0; b < blocks; ++b) {
          const BlockGradSums s = sums(c, b);
          dbeta += s.dy;
          dy_centered += s.dy_centered;
        }
        const GradCoefficients k = FinishFloat(g, v, c, dbeta, dy_centered);
        for (int64_t b = 0; b < blocks; ++b) dx(c, b, k);
      }
    });
    return;
  }
  // Pair i is block i / C of channel i % C (see SplitByChannel).
  const int64_t pairs = v.c * blocks;
  const int64_t pair_work = plan.Block(0).Count();
  partials_.resize(static_cast<size_t>(pairs));
  ParallelRows(pairs, 2 * pair_work, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) partials_[i] = sums(i % v.c, i / v.c);
  });
  coefficients_.resize(static_cast<size_t>(v.c));
  for (int64_t c = 0; c < v.c; ++c) {
    double dbeta = 0, dy_centered = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      dbeta += partials_[b * v.c + c].dy;
      dy_centered += partials_[b * v.c + c].dy_centered;
    }
    coefficients_[c] = FinishFloat(g, v, c, dbeta, dy_centered);
  }
  ParallelRows(pairs, 3 * pair_work, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) dx(i % v.c, i / v.c, coefficients_[i % v.c]);
  });
}

REGISTER_NN_CPU_KERNELS("batch_norm", BatchNormKernel);
REGISTER_NN_CPU_KERNELS("batch_norm_grad", BatchNormGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
