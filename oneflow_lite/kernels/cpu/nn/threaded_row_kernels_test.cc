// The nn kernels whose rows run over threads (kernels/cpu/parallel_rows.h):
// causal_softmax, layer_norm and their grads give the same bits on 1, 2 and
// 3 threads at GPT sizes and at odd sizes (partial lanes, a partial last
// block of rows), and their vectorized float32 rows agree with the float64
// kernels. (sparse_softmax_cross_entropy: cross_entropy_kernels_test.cc.)
#include <cstring>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

// Every output of every run has the bytes of the first run's.
void ExpectSameBits(const std::vector<TensorMap>& outs, const std::string& what) {
  for (size_t run = 1; run < outs.size(); ++run) {
    for (const auto& [lbn, first] : outs[0]) {
      const HostTensor& other = outs[run].at(lbn);
      ASSERT_EQ(other.ByteSize(), first.ByteSize()) << what << " " << lbn;
      EXPECT_EQ(std::memcmp(other.raw(), first.raw(), first.ByteSize()), 0)
          << what << " " << lbn << ": run " << run << " differs from one thread";
    }
  }
}

// A float64 copy of a float32 tensor.
HostTensor ToDouble(const HostTensor& t) { return HostTensor::FromVector(t.shape(), ToDoubles(t)); }

TensorMap ToDoubleEnv(const TensorMap& env) {
  TensorMap doubles;
  for (const auto& [lbn, t] : env) doubles.emplace(lbn, ToDouble(t));
  return doubles;
}

// ---- causal_softmax ----

OpConf CausalOp(const char* type, double scale) {
  OpConfBuilder b(type, "cs");
  if (std::string(type) == "causal_softmax") {
    b.Input("x", "in/x_0").Output("y");
  } else {
    b.Input("dy", "in/dy_0").Input("y", "in/y_0").Output("dx");
  }
  return b.Attr("scale", scale).Build();
}

TEST(ThreadedRowKernelsTest, CausalSoftmaxSameBitsOnAnyThreadCount) {
  // GPT attention (64 keys: full lanes only), then odd rows with Tq < Tk.
  for (const Shape& shape : {Shape({12, 4, 64, 64}), Shape({7, 45, 61})}) {
    for (DataType dtype : FloatTypes()) {
      const std::string what = DataTypeName(dtype) + std::string(" ") + shape.ToString();
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(shape, dtype), 1, -6, 6));
      std::vector<TensorMap> forward = RunOnThreads(CausalOp("causal_softmax", 0.17), &env);
      ExpectSameBits(forward, "causal_softmax " + what);
      env.emplace("in/y_0", forward[0].at("cs/y_0").Clone());
      env.emplace("in/dy_0", RandomTensor(TensorDesc(shape, dtype), 2));
      ExpectSameBits(RunOnThreads(CausalOp("causal_softmax_grad", 0.17), &env),
                     "causal_softmax_grad " + what);
    }
  }
}

// ---- layer_norm ----

OpConf LayerNormOp() {
  return OpConfBuilder("layer_norm", "ln")
      .Input("x", "in/x_0")
      .Input("gamma", "in/g_0")
      .Input("beta", "in/b_0")
      .Output("y")
      .Output("mean")
      .Output("inv_variance")
      .Attr("begin_norm_axis", int64_t{1})
      .Build();
}

OpConf LayerNormGradOp(bool stats_grads) {
  OpConfBuilder b("layer_norm_grad", "lng");
  b.Input("dy", "in/dy_0")
      .Input("x", "in/x_0")
      .Input("mean", "ln/mean_0")
      .Input("inv_variance", "ln/inv_variance_0")
      .Input("gamma", "in/g_0");
  if (stats_grads) b.Input("dmean", "in/dmean_0").Input("dinv_variance", "in/dinv_0");
  return b.Output("dx")
      .Output("dgamma")
      .Output("dbeta")
      .Attr("begin_norm_axis", int64_t{1})
      .Build();
}

// Runs layer_norm and then layer_norm_grad on env (x, gamma, beta, dy and
// maybe dmean, dinv), on 1, 2 and 3 threads; returns the first run's
// forward and backward outputs in one map.
TensorMap RunLayerNorm(TensorMap* env, bool stats_grads, const std::string& what) {
  std::vector<TensorMap> forward = RunOnThreads(LayerNormOp(), env);
  ExpectSameBits(forward, "layer_norm " + what);
  for (const auto& [lbn, t] : forward[0]) (*env)[lbn] = t.Clone();
  std::vector<TensorMap> backward = RunOnThreads(LayerNormGradOp(stats_grads), env);
  ExpectSameBits(backward, "layer_norm_grad " + what);
  TensorMap all = std::move(forward[0]);
  for (auto& [lbn, t] : backward[0]) all.emplace(lbn, std::move(t));
  return all;
}

TEST(ThreadedRowKernelsTest, LayerNormSameBitsOnAnyThreadCountAndFloatMatchesDouble) {
  // GPT (768 rows of 128), and 300 rows of 133: a partial lane block per row
  // and a partial last block of rows.
  for (const Shape& shape : {Shape({768, 128}), Shape({300, 133})}) {
    for (bool stats_grads : {false, true}) {
      const std::string what = shape.ToString() + (stats_grads ? " with dmean" : "");
      const Shape row({shape.dim(1)}), rows({shape.dim(0)});
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(shape, DT_FLOAT), 1, -2, 3));
      env.emplace("in/g_0", RandomTensor(TensorDesc(row, DT_FLOAT), 2));
      env.emplace("in/b_0", RandomTensor(TensorDesc(row, DT_FLOAT), 3));
      env.emplace("in/dy_0", RandomTensor(TensorDesc(shape, DT_FLOAT), 4));
      if (stats_grads) {
        env.emplace("in/dmean_0", RandomTensor(TensorDesc(rows, DT_FLOAT), 5));
        env.emplace("in/dinv_0", RandomTensor(TensorDesc(rows, DT_FLOAT), 6));
      }
      TensorMap doubles = ToDoubleEnv(env);
      const TensorMap got = RunLayerNorm(&env, stats_grads, "float32 " + what);
      const TensorMap want = RunLayerNorm(&doubles, stats_grads, "float64 " + what);
      for (const auto& [lbn, value] : want) {
        // dgamma and dbeta sum hundreds of float32 rows.
        const bool summed = lbn == "lng/dgamma_0" || lbn == "lng/dbeta_0";
        ExpectAllNear(got.at(lbn), ToDoubles(value), (summed ? 20 : 10) * Tolerance(DT_FLOAT),
                      what + " " + lbn);
      }
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
