#include <limits>

#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

struct PoolCase {
  Shape x;
  std::vector<int64_t> kernel, strides, padding;
};

std::vector<PoolCase> Cases() {
  return {
      {Shape({1, 1, 1, 1}), {1, 1}, {1, 1}, {0, 0}},
      {Shape({2, 3, 7, 5}), {3, 3}, {2, 2}, {1, 1}},
      {Shape({1, 2, 5, 9}), {2, 3}, {1, 2}, {1, 0}},
      {Shape({1, 1, 4, 4}), {2, 2}, {2, 2}, {0, 0}},
      // The 2x2 stride-2 direct path, odd sizes (the last row/column unused).
      {Shape({2, 3, 7, 9}), {2, 2}, {2, 2}, {0, 0}},
      {Shape({1, 2, 28, 28}), {2, 2}, {2, 2}, {0, 0}},
  };
}

OpConf PoolOp(const std::string& type, const PoolCase& c) {
  return OpConfBuilder(type, "pool")
      .Input("x", "in/x_0")
      .Output("y")
      .Attr("kernel_size", c.kernel)
      .Attr("strides", c.strides)
      .Attr("padding", c.padding)
      .Build();
}

std::vector<double> ReferencePool(const PoolCase& c, const std::vector<double>& x, bool max) {
  const int64_t planes = c.x.dim(0) * c.x.dim(1), h = c.x.dim(2), w = c.x.dim(3);
  const int64_t oh = (h + 2 * c.padding[0] - c.kernel[0]) / c.strides[0] + 1;
  const int64_t ow = (w + 2 * c.padding[1] - c.kernel[1]) / c.strides[1] + 1;
  std::vector<double> y;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int count = 0;
        for (int64_t a = 0; a < c.kernel[0]; ++a)
          for (int64_t b = 0; b < c.kernel[1]; ++b) {
            const int64_t r = i * c.strides[0] - c.padding[0] + a;
            const int64_t s = j * c.strides[1] - c.padding[1] + b;
            if (r < 0 || r >= h || s < 0 || s >= w) continue;
            const double v = x[(p * h + r) * w + s];
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        y.push_back(max ? best : sum / count);
      }
  return y;
}

TEST(PoolKernelTest, MatchesReference) {
  for (const std::string type : {"max_pool2d", "avg_pool2d"}) {
    for (DataType dtype : FloatTypes()) {
      for (const PoolCase& c : Cases()) {
        TensorMap env;
        env.emplace("in/x_0", RandomTensor(TensorDesc(c.x, dtype), 1));
        std::vector<double> expected =
            ReferencePool(c, ToDoubles(env.at("in/x_0")), type == "max_pool2d");
        TensorMap out = MustRun(PoolOp(type, c), &env);
        ExpectAllNear(out.at("pool/y_0"), expected, Tolerance(dtype), type + c.x.ToString());
      }
    }
  }
}

TEST(PoolKernelTest, MaxPoolIgnoresPaddingForNegativeInputs) {
  TensorMap env;
  env.emplace("in/x_0", HostTensor::FromVector<float>(Shape({1, 1, 1, 1}), {-5.f}));
  PoolCase c{Shape({1, 1, 1, 1}), {3, 3}, {1, 1}, {1, 1}};
  TensorMap out = MustRun(PoolOp("max_pool2d", c), &env);
  ExpectAllNear(out.at("pool/y_0"), {-5.0}, 0);
  out = MustRun(PoolOp("avg_pool2d", c), &env);
  ExpectAllNear(out.at("pool/y_0"), {-5.0}, 0);
}

TEST(PoolKernelTest, GradientsMatchFiniteDifferences) {
  for (const std::string type : {"max_pool2d", "avg_pool2d"}) {
    for (const PoolCase& c : Cases()) {
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(c.x, DT_DOUBLE), 7));
      Status status = CheckOpGradient(PoolOp(type, c), env);
      EXPECT_TRUE(status.ok()) << type << " " << c.x.ToString() << ": " << status;
    }
  }
}

TEST(PoolKernelTest, MaxPoolGradRoutesToFirstMaximumOnTies) {
  TensorMap env;
  env.emplace("in/dy_0", HostTensor::FromVector<float>(Shape({1, 1, 1, 1}), {3.f}));
  env.emplace("in/x_0", HostTensor::FromVector<float>(Shape({1, 1, 2, 2}), {1.f, 2.f, 2.f, 0.f}));
  env.emplace("in/y_0", HostTensor::FromVector<float>(Shape({1, 1, 1, 1}), {2.f}));
  OpConf op = OpConfBuilder("max_pool2d_grad", "g")
                  .Input("dy", "in/dy_0")
                  .Input("x", "in/x_0")
                  .Input("y", "in/y_0")
                  .Output("dx")
                  .Attr("kernel_size", std::vector<int64_t>{2, 2})
                  .Attr("strides", std::vector<int64_t>{2, 2})
                  .Attr("padding", std::vector<int64_t>{0, 0})
                  .Build();
  TensorMap out = MustRun(op, &env);
  ExpectAllNear(out.at("g/dx_0"), {0, 3, 0, 0}, 0);
}

// Ties everywhere (values in {0, 1}, mostly 1) on the 2x2 direct path: forward and
// gradient equal the first-maximum reference exactly.
TEST(PoolKernelTest, MaxPool2x2PathRoutesTiesLikeTheReference) {
  const Shape x_shape({1, 2, 5, 7}), y_shape({1, 2, 2, 3});
  std::vector<float> x(x_shape.elem_count()), dy(y_shape.elem_count());
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 4 == 3 ? 0.0f : 1.0f;
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i + 1);
  std::vector<double> want_y(dy.size()), want_dx(x.size(), 0.0);
  for (int64_t p = 0; p < 2; ++p) {
    for (int64_t oh = 0; oh < 2; ++oh) {
      for (int64_t ow = 0; ow < 3; ++ow) {
        int64_t best = -1;
        for (int64_t a = 0; a < 2; ++a) {
          for (int64_t b = 0; b < 2; ++b) {
            const int64_t k = p * 35 + (2 * oh + a) * 7 + 2 * ow + b;
            if (best < 0 || x[k] > x[best]) best = k;
          }
        }
        const int64_t o = (p * 2 + oh) * 3 + ow;
        want_y[o] = x[best];
        want_dx[best] += dy[o];
      }
    }
  }
  PoolCase c{x_shape, {2, 2}, {2, 2}, {0, 0}};
  TensorMap env;
  env.emplace("in/x_0", HostTensor::FromVector<float>(x_shape, x));
  TensorMap out = MustRun(PoolOp("max_pool2d", c), &env);
  ExpectAllNear(out.at("pool/y_0"), want_y, 0);
  env.emplace("in/dy_0", HostTensor::FromVector<float>(y_shape, dy));
  env.emplace("in/y_0", HostTensor::FromVector<float>(
                           y_shape, std::vector<float>(want_y.begin(), want_y.end())));
  OpConf grad = OpConfBuilder("max_pool2d_grad", "g")
                    .Input("dy", "in/dy_0")
                    .Input("x", "in/x_0")
                    .Input("y", "in/y_0")
                    .Output("dx")
                    .Attr("kernel_size", c.kernel)
                    .Attr("strides", c.strides)
                    .Attr("padding", c.padding)
                    .Build();
  TensorMap grads = MustRun(grad, &env);
  ExpectAllNear(grads.at("g/dx_0"), want_dx, 0);
}

TEST(PoolKernelTest, RejectsWindowLargerThanInput) {
  TensorMap env;
  env.emplace("in/x_0", HostTensor(TensorDesc(Shape({1, 1, 2, 2}), DT_FLOAT)));
  const std::string error = RunError(PoolOp("avg_pool2d", {Shape(), {3, 3}, {1, 1}, {0, 0}}), &env);
  EXPECT_NE(error.find("'pool'"), std::string::npos) << error;
  EXPECT_NE(error.find("(1, 1, 2, 2)"), std::string::npos) << error;
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
