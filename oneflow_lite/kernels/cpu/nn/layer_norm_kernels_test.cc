#include <cmath>

#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

OpConf LayerNormOp(int64_t begin_norm_axis, double epsilon = 1e-5) {
  return OpConfBuilder("layer_norm", "ln")
      .Input("x", "in/x_0")
      .Input("gamma", "in/g_0")
      .Input("beta", "in/b_0")
      .Output("y")
      .Output("mean")
      .Output("inv_variance")
      .Attr("begin_norm_axis", begin_norm_axis)
      .Attr("epsilon", epsilon)
      .Build();
}

Shape Suffix(const Shape& s, int64_t begin) {
  return Shape(std::vector<int64_t>(s.dims().begin() + begin, s.dims().end()));
}

struct Case {
  Shape x;
  int64_t begin;  // normalized
};

TEST(LayerNormKernelTest, MatchesReference) {
  const std::vector<Case> cases = {{Shape({1, 1}), 1},
                                   {Shape({3, 5}), 1},
                                   {Shape({2, 3, 7}), 1},
                                   {Shape({2, 3, 7}), 2},
                                   {Shape({4, 3}), 0}};
  for (DataType dtype : FloatTypes()) {
    for (const Case& c : cases) {
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(c.x, dtype), 1, -2, 3));
      env.emplace("in/g_0", RandomTensor(TensorDesc(Suffix(c.x, c.begin), dtype), 2));
      env.emplace("in/b_0", RandomTensor(TensorDesc(Suffix(c.x, c.begin), dtype), 3));
      const std::vector<double> x = ToDoubles(env.at("in/x_0"));
      const std::vector<double> g = ToDoubles(env.at("in/g_0"));
      const std::vector<double> b = ToDoubles(env.at("in/b_0"));
      const int64_t rows = c.x.Count(0, c.begin), cols = c.x.Count(c.begin);
      std::vector<double> y(x.size()), mean(rows), inv(rows);
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0, s2 = 0;
        for (int64_t k = 0; k < cols; ++k) s += x[r * cols + k];
        mean[r] = s / cols;
        for (int64_t k = 0; k < cols; ++k) s2 += std::pow(x[r * cols + k] - mean[r], 2);
        inv[r] = 1 / std::sqrt(s2 / cols + 1e-5);
        for (int64_t k = 0; k < cols; ++k) {
          y[r * cols + k] = (x[r * cols + k] - mean[r]) * inv[r] * g[k] + b[k];
        }
      }
      TensorMap out = MustRun(LayerNormOp(c.begin), &env);
      ExpectAllNear(out.at("ln/y_0"), y, Tolerance(dtype) * 10, "y " + c.x.ToString());
      ExpectAllNear(out.at("ln/mean_0"), mean, Tolerance(dtype), "mean");
      ExpectAllNear(out.at("ln/inv_variance_0"), inv, Tolerance(dtype) * 10, "inv_variance");
    }
  }
}

TEST(LayerNormKernelTest, GradientsMatchFiniteDifferences) {
  for (const Case& c :
       std::vector<Case>{{Shape({3, 5}), 1}, {Shape({2, 3, 4}), 1}, {Shape({1, 1}), 1}}) {
    TensorMap env;
    env.emplace("in/x_0", RandomTensor(TensorDesc(c.x, DT_DOUBLE), 4, -2, 2));
    env.emplace("in/g_0", RandomTensor(TensorDesc(Suffix(c.x, c.begin), DT_DOUBLE), 5));
    env.emplace("in/b_0", RandomTensor(TensorDesc(Suffix(c.x, c.begin), DT_DOUBLE), 6));
    GradCheckOptions options;
    options.rtol = 1e-4;
    // epsilon 1e-3 keeps inv_variance of a single element well-conditioned.
    Status status = CheckOpGradient(LayerNormOp(-static_cast<int64_t>(c.x.rank()) + c.begin, 1e-3),
                                    env, options);
    EXPECT_TRUE(status.ok()) << c.x.ToString() << ": " << status;
  }
}

// The usual training path: only y receives a gradient (no dmean/dinv_variance).
TEST(LayerNormKernelTest, GradOpWithOnlyDyMatchesFiniteDifferences) {
  const Shape x_shape({3, 2, 5});
  TensorMap env;
  env.emplace("in/x_0", RandomTensor(TensorDesc(x_shape, DT_DOUBLE), 4, -2, 2));
  env.emplace("in/g_0", RandomTensor(TensorDesc(Shape({2, 5}), DT_DOUBLE), 5));
  env.emplace("in/b_0", RandomTensor(TensorDesc(Shape({2, 5}), DT_DOUBLE), 6));
  const OpConf forward = LayerNormOp(1);
  TensorMap run_env;
  for (const auto& [lbn, t] : env) run_env.emplace(lbn, t.Clone());
  TensorMap out = MustRun(forward, &run_env);
  HostTensor dy = RandomTensor(TensorDesc(x_shape, DT_DOUBLE), 8);
  const std::vector<double> cotangent = ToDoubles(dy);
  for (auto& [lbn, t] : out) run_env.emplace(lbn, std::move(t));
  run_env.emplace("in/dy_0", std::move(dy));
  OpConf grad = OpConfBuilder("layer_norm_grad", "lng")
                    .Input("dy", "in/dy_0")
                    .Input("x", "in/x_0")
                    .Input("mean", "ln/mean_0")
                    .Input("inv_variance", "ln/inv_variance_0")
                    .Input("gamma", "in/g_0")
                    .Output("dx")
                    .Output("dgamma")
                    .Output("dbeta")
                    .Attr("begin_norm_axis", 1)
                    .Build();
  TensorMap grads = MustRun(grad, &run_env);
  const std::vector<std::pair<std::string, std::string>> checks = {
      {"in/x_0", "lng/dx_0"}, {"in/g_0", "lng/dgamma_0"}, {"in/b_0", "lng/dbeta_0"}};
  for (const auto& [input, grad_lbn] : checks) {
    ExpectAllNear(grads.at(grad_lbn), NumericGradient(forward, env, input, "ln/y_0", cotangent),
                  1e-6, grad_lbn);
  }
}

TEST(LayerNormKernelTest, GammaShapeMismatchNamesOpAndShapes) {
  TensorMap env;
  env.emplace("in/x_0", HostTensor(TensorDesc(Shape({2, 6}), DT_FLOAT)));
  env.emplace("in/g_0", HostTensor(TensorDesc(Shape({5}), DT_FLOAT)));
  env.emplace("in/b_0", HostTensor(TensorDesc(Shape({6}), DT_FLOAT)));
  const std::string error = RunError(LayerNormOp(1), &env);
  EXPECT_NE(error.find("'ln'"), std::string::npos) << error;
  EXPECT_NE(error.find("(5,)"), std::string::npos) << error;
  EXPECT_NE(error.find("(6,)"), std::string::npos) << error;
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
