// Fused kernels against the chain of plain kernels they replace, run on the
// same inputs: bias_add_relu == relu(bias_add). Tolerance: none (the fused
// kernel performs the same float operations; compared with CompareValues at
// tolerance 0), float32 and float64, odd sizes, rank 2 (dense) and rank 4
// (NCHW, axis 1), with exact zeros and negative values.
#include <gtest/gtest.h>

#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"

namespace oflite {
namespace math {
namespace {

struct FusedCase {
  Shape a;
  int64_t axis;
};

class FusedKernelTest : public ::testing::TestWithParam<DataType> {};

TEST_P(FusedKernelTest, BiasAddReluEqualsTheChain) {
  const std::vector<FusedCase> cases = {
      {Shape({1, 1}), 1},      {Shape({3, 7}), 1},      {Shape({5, 33}), 1},
      {Shape({64, 257}), 1},   {Shape({2, 3, 5, 7}), 1}, {Shape({3, 17, 1, 9}), 1},
      {Shape({4, 6}), 0},      {Shape({0, 5}), 1},
  };
  uint64_t seed = 1;
  for (const FusedCase& c : cases) {
    const int64_t channels = c.a.dim(c.axis);
    TensorMap env;
    env.emplace("a", RandomTensor(TensorDesc(c.a, GetParam()), ++seed, -1.0, 1.0));
    env.emplace("b", RandomTensor(TensorDesc(Shape({channels}), GetParam()), ++seed, -0.5, 0.5));
    const OpConf fused = OpConfBuilder("bias_add_relu", "f")
                             .Input("a", "a")
                             .Input("b", "b")
                             .Output("y")
                             .Attr("axis", c.axis)
                             .Build();
    const OpConf bias_add = OpConfBuilder("bias_add", "ba")
                                .Input("a", "a")
                                .Input("b", "b")
                                .Output("out")
                                .Attr("axis", c.axis)
                                .Build();
    const OpConf relu = OpConfBuilder("relu", "r").Input("x", "ba/out_0").Output("y").Build();
    StatusOr<HostTensor> got = RunSingle(fused, &env, "f/y_0");
    ASSERT_TRUE(got.ok()) << got.status();
    StatusOr<HostTensor> sum = RunSingle(bias_add, &env, "ba/out_0");
    ASSERT_TRUE(sum.ok()) << sum.status();
    env.emplace("ba/out_0", std::move(sum).value());
    StatusOr<HostTensor> want = RunSingle(relu, &env, "r/y_0");
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got->shape(), want->shape());
    EXPECT_EQ(CompareValues(ToDoubles(*got), ToDoubles(*want), 0.0), "")
        << DataTypeName(GetParam()) << " " << c.a.ToString() << " axis " << c.axis;
  }
}

TEST_P(FusedKernelTest, BiasAddReluRejectsAWrongBias) {
  TensorMap env;
  env.emplace("a", RandomTensor(TensorDesc(Shape({3, 4}), GetParam()), 1, -1.0, 1.0));
  env.emplace("b", RandomTensor(TensorDesc(Shape({5}), GetParam()), 2, -1.0, 1.0));
  const OpConf fused =
      OpConfBuilder("bias_add_relu", "f").Input("a", "a").Input("b", "b").Output("y").Build();
  StatusOr<HostTensor> got = RunSingle(fused, &env, "f/y_0");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("bias"), std::string::npos) << got.status();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedKernelTest, ::testing::Values(DT_FLOAT, DT_DOUBLE));

}  // namespace
}  // namespace math
}  // namespace oflite
