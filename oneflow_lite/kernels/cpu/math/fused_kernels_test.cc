// Fused kernels against the chain of plain kernels they replace, run on the
// same inputs: bias_add_relu == relu(bias_add). Tolerance: none (the fused
// kernel performs the same float operations; compared with CompareValues at
// tolerance 0), float32 and float64, odd sizes, rank 2 (dense) and rank 4
// (NCHW, axis 1), with exact zeros and negative values.
// gelu_and_derivative then mul == gelu and gelu_grad, bit for bit.
// matmul_bias == bias_add(matmul) along the last axis: exact in float64 and
// with the reference library (the same GEMM, then the same additions); with
// oneDNN's epilogue within float32 GEMM rounding; every transpose, 2-D and a
// batched a (the Linear case), and a GEMM shaped like the GPT example's.
#include <tuple>

#include <gtest/gtest.h>

#include "oneflow_lite/kernels/cpu/cpu_library.h"
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

// gelu_and_derivative's y is gelu's, and mul(dy, dydx) is gelu_grad's dx,
// bit for bit (the compiler's gelu fusion relies on it).
TEST_P(FusedKernelTest, GeluAndDerivativeGivesGeluAndItsGradient) {
  uint64_t seed = 50;
  for (const Shape& shape : {Shape({1}), Shape({3, 7}), Shape({12, 64, 40}), Shape({0, 5})}) {
    TensorMap env;
    env.emplace("x", RandomTensor(TensorDesc(shape, GetParam()), ++seed, -6.0, 6.0));
    env.emplace("dy", RandomTensor(TensorDesc(shape, GetParam()), ++seed, -1.0, 1.0));
    const OpConf fused = OpConfBuilder("gelu_and_derivative", "f")
                             .Input("x", "x")
                             .Output("y")
                             .Output("dydx")
                             .Build();
    StatusOr<HostTensor> y = RunSingle(fused, &env, "f/y_0");
    ASSERT_TRUE(y.ok()) << y.status();
    StatusOr<HostTensor> dydx = RunSingle(fused, &env, "f/dydx_0");
    ASSERT_TRUE(dydx.ok()) << dydx.status();
    env.emplace("f/dydx_0", std::move(dydx).value());
    const OpConf mul =
        OpConfBuilder("mul", "m").Input("x", "dy").Input("y", "f/dydx_0").Output("out").Build();
    StatusOr<HostTensor> dx = RunSingle(mul, &env, "m/out_0");
    ASSERT_TRUE(dx.ok()) << dx.status();
    const OpConf gelu = OpConfBuilder("gelu", "g").Input("x", "x").Output("y").Build();
    const OpConf grad =
        OpConfBuilder("gelu_grad", "gg").Input("dy", "dy").Input("x", "x").Output("dx").Build();
    StatusOr<HostTensor> want_y = RunSingle(gelu, &env, "g/y_0");
    ASSERT_TRUE(want_y.ok()) << want_y.status();
    StatusOr<HostTensor> want_dx = RunSingle(grad, &env, "gg/dx_0");
    ASSERT_TRUE(want_dx.ok()) << want_dx.status();
    EXPECT_EQ(CompareValues(ToDoubles(*y), ToDoubles(*want_y), 0.0), "")
        << DataTypeName(GetParam()) << " " << shape.ToString();
    EXPECT_EQ(CompareValues(ToDoubles(*dx), ToDoubles(*want_dx), 0.0), "")
        << DataTypeName(GetParam()) << " " << shape.ToString();
  }
  // Only the erf form is fused.
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({4}), GetParam()), 1, -1.0, 1.0));
  const OpConf tanh = OpConfBuilder("gelu_and_derivative", "f")
                          .Input("x", "x")
                          .Output("y")
                          .Output("dydx")
                          .Attr("approximate", std::string("tanh"))
                          .Build();
  StatusOr<HostTensor> refused = RunSingle(tanh, &env, "f/y_0");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("erf form"), std::string::npos) << refused.status();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedKernelTest, ::testing::Values(DT_FLOAT, DT_DOUBLE));

class MatmulBiasTest : public ::testing::TestWithParam<std::tuple<DataType, CpuKernelLibrary>> {
 protected:
  void SetUp() override { SetCpuKernelLibrary(std::get<1>(GetParam())); }
  void TearDown() override { SetCpuKernelLibrary(CpuKernelLibrary::kOneDnn); }
  DataType dtype() const { return std::get<0>(GetParam()); }
  // Exact unless float32 through oneDNN's own GEMM.
  bool exact() const {
    return dtype() == DT_DOUBLE || std::get<1>(GetParam()) == CpuKernelLibrary::kReference;
  }
};

struct MatmulBiasCase {
  std::vector<int64_t> batch;  // of a (b is one matrix)
  int64_t m, k, n;
};

TEST_P(MatmulBiasTest, EqualsMatmulThenBiasAdd) {
  const std::vector<MatmulBiasCase> cases = {
      {{}, 1, 1, 1},   {{}, 3, 5, 7},     {{}, 17, 33, 9},  {{2, 3}, 5, 4, 6},
      {{4}, 7, 19, 1}, {{}, 64, 128, 96}, {{12}, 64, 128, 65},
  };
  uint64_t seed = 100;
  for (const MatmulBiasCase& c : cases) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      if (ta && !c.batch.empty()) continue;  // not one GEMM: never fused
      std::vector<int64_t> a_dims = c.batch;
      a_dims.push_back(ta ? c.k : c.m);
      a_dims.push_back(ta ? c.m : c.k);
      TensorMap env;
      env.emplace("a", RandomTensor(TensorDesc(Shape(a_dims), dtype()), ++seed, -1.0, 1.0));
      env.emplace("b", RandomTensor(TensorDesc(tb ? Shape({c.n, c.k}) : Shape({c.k, c.n}), dtype()),
                                    ++seed, -1.0, 1.0));
      env.emplace("bias", RandomTensor(TensorDesc(Shape({c.n}), dtype()), ++seed, -0.5, 0.5));
      const OpConf fused = OpConfBuilder("matmul_bias", "f")
                               .Input("a", "a")
                               .Input("b", "b")
                               .Input("bias", "bias")
                               .Output("out")
                               .Attr("transpose_a", ta)
                               .Attr("transpose_b", tb)
                               .Build();
      const OpConf matmul = OpConfBuilder("matmul", "mm")
                                .Input("a", "a")
                                .Input("b", "b")
                                .Output("out")
                                .Attr("transpose_a", ta)
                                .Attr("transpose_b", tb)
                                .Build();
      const OpConf bias_add = OpConfBuilder("bias_add", "ba")
                                  .Input("a", "mm/out_0")
                                  .Input("b", "bias")
                                  .Output("out")
                                  .Attr("axis", int64_t{-1})
                                  .Build();
      StatusOr<HostTensor> got = RunSingle(fused, &env, "f/out_0");
      ASSERT_TRUE(got.ok()) << got.status();
      StatusOr<HostTensor> product = RunSingle(matmul, &env, "mm/out_0");
      ASSERT_TRUE(product.ok()) << product.status();
      env.emplace("mm/out_0", std::move(product).value());
      StatusOr<HostTensor> want = RunSingle(bias_add, &env, "ba/out_0");
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_EQ(got->shape(), want->shape());
      // float32 sums of k products of magnitude <= 1, blocked differently.
      const double tolerance = exact() ? 0.0 : 1e-6 * c.k;
      EXPECT_EQ(CompareValues(ToDoubles(*got), ToDoubles(*want), tolerance), "")
          << DataTypeName(dtype()) << " a " << env.at("a").shape() << " b "
          << env.at("b").shape() << " ta " << ta << " tb " << tb;
    }
  }
}

TEST_P(MatmulBiasTest, RejectsAWrongBiasAndABatchedB) {
  TensorMap env;
  env.emplace("a", RandomTensor(TensorDesc(Shape({3, 4}), dtype()), 1, -1.0, 1.0));
  env.emplace("b", RandomTensor(TensorDesc(Shape({4, 5}), dtype()), 2, -1.0, 1.0));
  env.emplace("b3", RandomTensor(TensorDesc(Shape({2, 4, 5}), dtype()), 3, -1.0, 1.0));
  env.emplace("bias", RandomTensor(TensorDesc(Shape({4}), dtype()), 4, -1.0, 1.0));
  env.emplace("bias5", RandomTensor(TensorDesc(Shape({5}), dtype()), 5, -1.0, 1.0));
  const auto op = [](const std::string& b, const std::string& bias) {
    return OpConfBuilder("matmul_bias", "f")
        .Input("a", "a")
        .Input("b", b)
        .Input("bias", bias)
        .Output("out")
        .Build();
  };
  StatusOr<HostTensor> wrong_bias = RunSingle(op("b", "bias"), &env, "f/out_0");
  ASSERT_FALSE(wrong_bias.ok());
  EXPECT_NE(wrong_bias.status().message().find("bias must be 1-D of length n = 5"),
            std::string::npos)
      << wrong_bias.status();
  StatusOr<HostTensor> batched_b = RunSingle(op("b3", "bias5"), &env, "f/out_0");
  ASSERT_FALSE(batched_b.ok());
  EXPECT_NE(batched_b.status().message().find("needs one GEMM"), std::string::npos)
      << batched_b.status();
}

INSTANTIATE_TEST_SUITE_P(
    DtypesAndLibraries, MatmulBiasTest,
    ::testing::Combine(::testing::Values(DT_FLOAT, DT_DOUBLE),
                       ::testing::Values(CpuKernelLibrary::kOneDnn, CpuKernelLibrary::kReference)));

}  // namespace
}  // namespace math
}  // namespace oflite
