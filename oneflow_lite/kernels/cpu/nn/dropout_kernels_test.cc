#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

OpConf DropoutOp(double rate, int64_t seed) {
  return OpConfBuilder("dropout", "drop")
      .Input("x", "in/x_0")
      .Output("y")
      .Output("mask")
      .Attr("rate", rate)
      .Attr("seed", seed)
      .Build();
}

TensorMap RunDropout(DataType dtype, const Shape& shape, double rate, int64_t seed,
                     int64_t iteration, int64_t parallel_id = 0) {
  TensorMap env;
  env.emplace("in/x_0", RandomTensor(TensorDesc(shape, dtype), 1));
  RunOpOptions options;
  options.iteration = iteration;
  options.parallel_id = parallel_id;
  options.parallel_num = 4;
  return MustRun(DropoutOp(rate, seed), &env, options);
}

TEST(DropoutKernelTest, ScalesKeptElementsAndZeroesDropped) {
  for (DataType dtype : FloatTypes()) {
    for (const Shape& shape : {Shape({0}), Shape({1}), Shape({37, 29})}) {
      const double rate = 0.3;
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(shape, dtype), 1));
      const std::vector<double> x = ToDoubles(env.at("in/x_0"));
      TensorMap out = MustRun(DropoutOp(rate, 5), &env);
      const std::vector<double> mask = ToDoubles(out.at("drop/mask_0"));
      std::vector<double> expected(x.size());
      int64_t kept = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(mask[i] == 0 || mask[i] == 1);
        expected[i] = mask[i] ? x[i] / (1 - rate) : 0;
        kept += mask[i] != 0;
      }
      ExpectAllNear(out.at("drop/y_0"), expected, Tolerance(dtype));
      if (x.size() > 1000) {
        EXPECT_NEAR(static_cast<double>(kept) / x.size(), 0.7, 0.04);
      }
    }
  }
}

TEST(DropoutKernelTest, MaskDeterminedBySeedIterationAndDevice) {
  const Shape shape({16, 16});
  auto mask = [&](int64_t seed, int64_t iteration, int64_t parallel_id) {
    return ToDoubles(
        RunDropout(DT_FLOAT, shape, 0.5, seed, iteration, parallel_id).at("drop/mask_0"));
  };
  EXPECT_EQ(mask(3, 7, 1), mask(3, 7, 1));
  EXPECT_NE(mask(3, 7, 1), mask(3, 8, 1));
  EXPECT_NE(mask(3, 7, 1), mask(3, 7, 2));
  EXPECT_NE(mask(3, 7, 1), mask(4, 7, 1));
  // The same mask in float32 and float64.
  EXPECT_EQ(mask(3, 7, 1), ToDoubles(RunDropout(DT_DOUBLE, shape, 0.5, 3, 7, 1).at("drop/mask_0")));
}

TEST(DropoutKernelTest, RateZeroKeepsEverything) {
  TensorMap out = RunDropout(DT_DOUBLE, Shape({5, 3}), 0.0, 1, 0);
  for (double m : ToDoubles(out.at("drop/mask_0"))) EXPECT_EQ(m, 1);
}

TEST(DropoutKernelTest, GradientMatchesFiniteDifferences) {
  TensorMap env;
  env.emplace("in/x_0", RandomTensor(TensorDesc(Shape({7, 5}), DT_DOUBLE), 1));
  Status status = CheckOpGradient(DropoutOp(0.4, 9), env);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(DropoutKernelTest, GradMaskShapeMismatchNamesOpAndShapes) {
  TensorMap env;
  env.emplace("in/dy_0", HostTensor(TensorDesc(Shape({3, 2}), DT_FLOAT)));
  env.emplace("in/m_0", HostTensor(TensorDesc(Shape({2, 3}), DT_UINT8)));
  OpConf op = OpConfBuilder("dropout_grad", "dg")
                  .Input("dy", "in/dy_0")
                  .Input("mask", "in/m_0")
                  .Output("dx")
                  .Attr("rate", 0.5)
                  .Build();
  const std::string error = RunError(op, &env);
  EXPECT_NE(error.find("'dg'"), std::string::npos) << error;
  EXPECT_NE(error.find("(3, 2)"), std::string::npos) << error;
  EXPECT_NE(error.find("(2, 3)"), std::string::npos) << error;
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
