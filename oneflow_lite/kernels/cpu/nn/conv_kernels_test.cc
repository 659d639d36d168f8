#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

struct ConvCase {
  Shape x, weight;
  std::vector<int64_t> strides, padding, dilations;
};

std::vector<ConvCase> Cases() {
  return {
      {Shape({1, 1, 1, 1}), Shape({1, 1, 1, 1}), {1, 1}, {0, 0}, {1, 1}},
      {Shape({2, 3, 7, 5}), Shape({4, 3, 3, 3}), {2, 2}, {1, 1}, {1, 1}},
      {Shape({1, 2, 9, 7}), Shape({3, 2, 3, 2}), {1, 2}, {2, 1}, {2, 1}},
      {Shape({3, 5, 4, 3}), Shape({2, 5, 1, 1}), {1, 1}, {0, 0}, {1, 1}},  // pointwise
      {Shape({1, 1, 5, 5}), Shape({1, 1, 5, 5}), {1, 1}, {0, 0}, {1, 1}},  // 1x1 output
      // im2col/col2im column ranges: stride 1 with padding (contiguous copies),
      // dilation with padding, stride 3 with padding wider than a stride.
      {Shape({2, 3, 9, 11}), Shape({4, 3, 3, 3}), {1, 1}, {1, 1}, {1, 1}},
      {Shape({1, 2, 8, 9}), Shape({3, 2, 3, 3}), {1, 1}, {2, 2}, {2, 2}},
      {Shape({1, 1, 11, 13}), Shape({2, 1, 5, 5}), {3, 3}, {2, 4}, {1, 1}},
  };
}

OpConf ConvOp(const ConvCase& c) {
  return OpConfBuilder("conv2d", "conv")
      .Input("x", "in/x_0")
      .Input("weight", "in/w_0")
      .Output("y")
      .Attr("strides", c.strides)
      .Attr("padding", c.padding)
      .Attr("dilations", c.dilations)
      .Build();
}

// Direct (7-loop) convolution.
std::vector<double> ReferenceConv(const ConvCase& c, const std::vector<double>& x,
                                  const std::vector<double>& w, Shape* y_shape) {
  const int64_t n_ = c.x.dim(0), ch = c.x.dim(1), h = c.x.dim(2), wd = c.x.dim(3);
  const int64_t o_ = c.weight.dim(0), kh = c.weight.dim(2), kw = c.weight.dim(3);
  const int64_t oh = (h + 2 * c.padding[0] - c.dilations[0] * (kh - 1) - 1) / c.strides[0] + 1;
  const int64_t ow = (wd + 2 * c.padding[1] - c.dilations[1] * (kw - 1) - 1) / c.strides[1] + 1;
  *y_shape = Shape({n_, o_, oh, ow});
  std::vector<double> y(n_ * o_ * oh * ow, 0.0);
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t o = 0; o < o_; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = 0;
          for (int64_t cc = 0; cc < ch; ++cc)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t b = 0; b < kw; ++b) {
                const int64_t r = i * c.strides[0] - c.padding[0] + a * c.dilations[0];
                const int64_t s = j * c.strides[1] - c.padding[1] + b * c.dilations[1];
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                sum += x[((n * ch + cc) * h + r) * wd + s] * w[((o * ch + cc) * kh + a) * kw + b];
              }
          y[((n * o_ + o) * oh + i) * ow + j] = sum;
        }
  return y;
}

TEST(Conv2dKernelTest, MatchesDirectConvolution) {
  for (DataType dtype : FloatTypes()) {
    for (const ConvCase& c : Cases()) {
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(c.x, dtype), 1));
      env.emplace("in/w_0", RandomTensor(TensorDesc(c.weight, dtype), 2));
      Shape y_shape;
      std::vector<double> expected =
          ReferenceConv(c, ToDoubles(env.at("in/x_0")), ToDoubles(env.at("in/w_0")), &y_shape);
      TensorMap out = MustRun(ConvOp(c), &env);
      EXPECT_EQ(out.at("conv/y_0").shape(), y_shape);
      ExpectAllNear(out.at("conv/y_0"), expected, Tolerance(dtype) * 10, c.x.ToString());
    }
  }
}

TEST(Conv2dKernelTest, EmptyBatchAndKernelReuseAcrossCalls) {
  ConvCase c = Cases()[1];
  c.x = Shape({0, 3, 7, 5});
  TensorMap env;
  env.emplace("in/x_0", HostTensor(TensorDesc(c.x, DT_FLOAT)));
  env.emplace("in/w_0", RandomTensor(TensorDesc(c.weight, DT_FLOAT), 2));
  TensorMap out = MustRun(ConvOp(c), &env);
  EXPECT_EQ(out.at("conv/y_0").shape(), Shape({0, 4, 4, 3}));
}

TEST(Conv2dKernelTest, GradientsMatchFiniteDifferences) {
  for (const ConvCase& c : Cases()) {
    TensorMap env;
    env.emplace("in/x_0", RandomTensor(TensorDesc(c.x, DT_DOUBLE), 3));
    env.emplace("in/w_0", RandomTensor(TensorDesc(c.weight, DT_DOUBLE), 4));
    Status status = CheckOpGradient(ConvOp(c), env);
    EXPECT_TRUE(status.ok()) << c.x.ToString() << ": " << status;
  }
}

// The float32 grad kernels agree with the float64 ones on the same values.
TEST(Conv2dKernelTest, FloatGradKernelsMatchDouble) {
  const ConvCase c = Cases()[2];
  Shape y_shape;
  ReferenceConv(c, std::vector<double>(c.x.elem_count()),
                std::vector<double>(c.weight.elem_count()), &y_shape);
  auto run = [&](const std::string& type, DataType dtype, const std::string& out_arg) {
    TensorMap env;
    env.emplace("in/dy_0", RandomTensor(TensorDesc(y_shape, dtype), 5));
    const bool data = type == "conv2d_grad_data";
    env.emplace("in/a_0", RandomTensor(TensorDesc(data ? c.weight : c.x, dtype), 6));
    env.emplace("in/like_0", HostTensor(TensorDesc(data ? c.x : c.weight, dtype)));
    OpConf op = OpConfBuilder(type, "g")
                    .Input("dy", "in/dy_0")
                    .Input(data ? "weight" : "x", "in/a_0")
                    .Input("like", "in/like_0")
                    .Output(out_arg)
                    .Attr("strides", c.strides)
                    .Attr("padding", c.padding)
                    .Attr("dilations", c.dilations)
                    .Build();
    TensorMap out = MustRun(op, &env);
    return ToDoubles(out.at("g/" + out_arg + "_0"));
  };
  for (auto [type, arg] : std::vector<std::pair<std::string, std::string>>{
           {"conv2d_grad_data", "dx"}, {"conv2d_grad_filter", "dw"}}) {
    std::vector<double> in_double = run(type, DT_DOUBLE, arg);
    std::vector<double> in_float = run(type, DT_FLOAT, arg);
    ASSERT_EQ(in_double.size(), in_float.size());
    for (size_t i = 0; i < in_double.size(); ++i) {
      // RandomTensor draws the same values in both dtypes up to float rounding.
      EXPECT_NEAR(in_float[i], in_double[i], 1e-4 * std::max(1.0, std::fabs(in_double[i])))
          << type << " element " << i;
    }
  }
}

// One kernel object serves many iterations: its scratch (allocated in Init)
// is reused, the filter gradient is re-zeroed each call, and a smaller
// dynamic batch works.
TEST(Conv2dKernelTest, KernelObjectReusedAcrossCalls) {
  const ConvCase c = Cases()[1];
  Shape y_shape;
  ReferenceConv(c, std::vector<double>(c.x.elem_count()),
                std::vector<double>(c.weight.elem_count()), &y_shape);
  OpConf op = OpConfBuilder("conv2d_grad_filter", "gf")
                  .Input("dy", "in/dy_0")
                  .Input("x", "in/x_0")
                  .Input("like", "in/like_0")
                  .Output("dw")
                  .Attr("strides", c.strides)
                  .Attr("padding", c.padding)
                  .Attr("dilations", c.dilations)
                  .Build();
  CpuDeviceContext cpu;
  KernelInitContext init;
  init.op = &op;
  init.inputs["dy"] = {TensorDesc(y_shape, DT_DOUBLE)};
  init.inputs["x"] = {TensorDesc(c.x, DT_DOUBLE)};
  init.inputs["like"] = {TensorDesc(c.weight, DT_DOUBLE)};
  init.outputs["dw"] = {TensorDesc(c.weight, DT_DOUBLE)};
  init.device = &cpu;
  StatusOr<std::unique_ptr<Kernel>> kernel = CreateAndInitKernel(init, DEVICE_CPU, DT_DOUBLE);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  for (int64_t batch : {c.x.dim(0), c.x.dim(0), int64_t{1}}) {
    Shape x_shape = c.x, dy_shape = y_shape;
    x_shape.mutable_dim(0) = batch;
    dy_shape.mutable_dim(0) = batch;
    TensorMap env;
    env.emplace("in/dy_0", RandomTensor(TensorDesc(dy_shape, DT_DOUBLE), 10 + batch));
    env.emplace("in/x_0", RandomTensor(TensorDesc(x_shape, DT_DOUBLE), 20 + batch));
    env.emplace("in/like_0", HostTensor(TensorDesc(c.weight, DT_DOUBLE)));
    const std::vector<double> fresh = ToDoubles(MustRun(op, &env).at("gf/dw_0"));
    HostTensor dw(TensorDesc(c.weight, DT_DOUBLE));
    Blob dy_blob = env.at("in/dy_0").AsBlob(), x_blob = env.at("in/x_0").AsBlob();
    Blob like_blob = env.at("in/like_0").AsBlob(), dw_blob = dw.AsBlob();
    KernelContext ctx(op, &cpu, 0);
    ctx.BindInput("dy", &dy_blob);
    ctx.BindInput("x", &x_blob);
    ctx.BindInput("like", &like_blob);
    ctx.BindOutput("dw", &dw_blob);
    ASSERT_TRUE((*kernel)->Forward(&ctx).ok());
    ExpectAllNear(dw, fresh, 1e-12, "batch " + std::to_string(batch));
  }
}

TEST(Conv2dKernelTest, GradDataRejectsWrongDy) {
  const ConvCase c = Cases()[1];
  TensorMap env;
  env.emplace("in/dy_0", HostTensor(TensorDesc(Shape({2, 4, 4, 4}), DT_DOUBLE)));
  env.emplace("in/w_0", HostTensor(TensorDesc(c.weight, DT_DOUBLE)));
  env.emplace("in/like_0", HostTensor(TensorDesc(c.x, DT_DOUBLE)));
  OpConf op = OpConfBuilder("conv2d_grad_data", "gd")
                  .Input("dy", "in/dy_0")
                  .Input("weight", "in/w_0")
                  .Input("like", "in/like_0")
                  .Output("dx")
                  .Attr("strides", c.strides)
                  .Attr("padding", c.padding)
                  .Build();
  const std::string error = RunError(op, &env);
  EXPECT_NE(error.find("'gd'"), std::string::npos) << error;
  EXPECT_NE(error.find("(2, 4, 4, 4)"), std::string::npos) << error;
  EXPECT_NE(error.find("(2, 4, 4, 3)"), std::string::npos) << error;
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
