// one_hot, gather/gather_grad, adaptive_avg_pool2d(+grad) and
// binary_cross_entropy_with_logits(+grad): CPU kernels against direct
// references at sizes 0, 1 and odd, bad indices naming op/index/position,
// finite-difference gradient checks and every offered SBP signature.
#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace nn {
namespace {

using testing::ExpectAllNear;
using testing::FloatTypes;
using testing::MustRun;
using testing::RunError;
using testing::ToDoubles;

TEST(OneHotKernelTest, MatchesTheReferenceForEveryIndexAndOutputType) {
  for (DataType index_type : {DT_INT32, DT_INT64}) {
    for (DataType out_type : FloatTypes()) {
      for (const Shape& shape : {Shape({0}), Shape({1}), Shape({3, 5})}) {
        TensorMap env;
        env.emplace("i", RandomTensor(TensorDesc(shape, index_type), 3, 0, 7));
        OpConf op = OpConfBuilder("one_hot", "oh")
                        .Input("indices", "i")
                        .Output("out")
                        .Attr("depth", int64_t{7})
                        .Attr("on_value", 2.5)
                        .Attr("off_value", -1.0)
                        .Attr("dtype", out_type)
                        .Build();
        TensorMap out = MustRun(op, &env);
        const HostTensor& got = out.at("oh/out_0");
        ASSERT_EQ(got.dtype(), out_type);
        std::vector<int64_t> dims = shape.dims();
        dims.push_back(7);
        ASSERT_EQ(got.shape(), Shape(dims));
        const std::vector<double> indices = ToDoubles(env.at("i"));
        std::vector<double> want(got.elem_count(), -1.0);
        for (size_t p = 0; p < indices.size(); ++p) want[p * 7 + indices[p]] = 2.5;
        EXPECT_EQ(ToDoubles(got), want) << shape;
      }
    }
  }
}

TEST(OneHotKernelTest, AnIndexOutOfRangeNamesTheOpIndexAndPosition) {
  TensorMap env;
  HostTensor indices(TensorDesc(Shape({3}), DT_INT32));
  indices.data<int32_t>()[0] = 1;
  indices.data<int32_t>()[1] = 4;
  indices.data<int32_t>()[2] = -1;
  env.emplace("i", std::move(indices));
  OpConf op = OpConfBuilder("one_hot", "oh")
                  .Input("indices", "i")
                  .Output("out")
                  .Attr("depth", int64_t{4})
                  .Build();
  const std::string error = RunError(op, &env);
  EXPECT_NE(error.find("op 'oh' (one_hot) at iteration 0: index 4 at position 1 is out of range "
                       "[0, 4)"),
            std::string::npos)
      << error;
}

OpConf Gather() {
  return OpConfBuilder("gather", "ga").Input("x", "x").Input("indices", "i").Output("out").Build();
}

TEST(GatherKernelTest, GathersRowsOfAnyShape) {
  for (DataType dtype : FloatTypes()) {
    for (const auto& [x_shape, i_shape] :
         std::vector<std::pair<Shape, Shape>>{{Shape({5, 3, 2}), Shape({0})},
                                              {Shape({1}), Shape({1})},
                                              {Shape({7, 3}), Shape({3, 5})},
                                              {Shape({5, 3, 2}), Shape({4})}}) {
      TensorMap env;
      env.emplace("x", RandomTensor(TensorDesc(x_shape, dtype), 1));
      env.emplace("i", RandomTensor(TensorDesc(i_shape, DT_INT64), 2, 0, x_shape.dim(0)));
      TensorMap out = MustRun(Gather(), &env);
      const int64_t row = x_shape.elem_count() / x_shape.dim(0);
      const std::vector<double> x = ToDoubles(env.at("x")), i = ToDoubles(env.at("i"));
      std::vector<double> want;
      for (double index : i) {
        for (int64_t d = 0; d < row; ++d) want.push_back(x[static_cast<int64_t>(index) * row + d]);
      }
      EXPECT_EQ(ToDoubles(out.at("ga/out_0")), want) << x_shape << i_shape;
    }
  }
}

TEST(GatherKernelTest, BadIndexNamesTheOpIndexPositionAndRowCount) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({3, 2}), DT_FLOAT), 1));
  HostTensor indices(TensorDesc(Shape({2}), DT_INT32));
  indices.data<int32_t>()[0] = 0;
  indices.data<int32_t>()[1] = 3;
  env.emplace("i", std::move(indices));
  const std::string error = RunError(Gather(), &env);
  EXPECT_NE(error.find("op 'ga' (gather) at iteration 0: index 3 at position 1 is out of range "
                       "[0, 3) (rows of x)"),
            std::string::npos)
      << error;
}

TEST(GatherGradTest, FiniteDifferencesWithRepeatedIndices) {
  for (const auto& [x_shape, i_shape] :
       std::vector<std::pair<Shape, Shape>>{{Shape({1}), Shape({1})},
                                            {Shape({5, 3}), Shape({7})},
                                            {Shape({3, 1, 2}), Shape({2, 3})}}) {
    TensorMap env;
    env.emplace("x", RandomTensor(TensorDesc(x_shape, DT_DOUBLE), 5));
    env.emplace("i", RandomTensor(TensorDesc(i_shape, DT_INT32), 6, 0, x_shape.dim(0)));
    Status status = CheckOpGradient(Gather(), env);
    EXPECT_TRUE(status.ok()) << status << x_shape << i_shape;
  }
}

OpConf AdaptivePool(int64_t oh, int64_t ow) {
  return OpConfBuilder("adaptive_avg_pool2d", "ap")
      .Input("x", "x")
      .Output("y")
      .Attr("output_size", std::vector<int64_t>{oh, ow})
      .Build();
}

TEST(AdaptiveAvgPoolKernelTest, AveragesOverlappingBins) {
  for (DataType dtype : FloatTypes()) {
    struct Case {
      Shape x;
      int64_t oh, ow;
    };
    for (const Case& c : {Case{Shape({0, 2, 3, 3}), 2, 2}, Case{Shape({1, 1, 1, 1}), 1, 1},
                          Case{Shape({2, 3, 5, 7}), 3, 2}, Case{Shape({1, 2, 2, 3}), 3, 5}}) {
      TensorMap env;
      env.emplace("x", RandomTensor(TensorDesc(c.x, dtype), 7));
      TensorMap out = MustRun(AdaptivePool(c.oh, c.ow), &env);
      const int64_t planes = c.x.dim(0) * c.x.dim(1), h = c.x.dim(2), w = c.x.dim(3);
      const std::vector<double> x = ToDoubles(env.at("x"));
      std::vector<double> want;
      for (int64_t p = 0; p < planes; ++p) {
        for (int64_t i = 0; i < c.oh; ++i) {
          for (int64_t j = 0; j < c.ow; ++j) {
            // floor(i h / oh) .. ceil((i + 1) h / oh), written with std::floor/ceil.
            const int64_t r0 = std::floor(double(i) * h / c.oh),
                          r1 = std::ceil(double(i + 1) * h / c.oh);
            const int64_t s0 = std::floor(double(j) * w / c.ow),
                          s1 = std::ceil(double(j + 1) * w / c.ow);
            double sum = 0;
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t s = s0; s < s1; ++s) sum += x[(p * h + r) * w + s];
            }
            want.push_back(sum / double((r1 - r0) * (s1 - s0)));
          }
        }
      }
      ExpectAllNear(out.at("ap/y_0"), want, testing::Tolerance(dtype), c.x.ToString());
    }
  }
}

TEST(AdaptiveAvgPoolKernelTest, BadOutputSizeIsAnInferenceError) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({1, 1, 3, 3}), DT_FLOAT), 7));
  const std::string error = RunError(AdaptivePool(0, 2), &env);
  EXPECT_NE(error.find("op 'ap' (adaptive_avg_pool2d): output_size must be two values >= 1"),
            std::string::npos)
      << error;
}

TEST(AdaptiveAvgPoolGradTest, FiniteDifferences) {
  for (const auto& [shape, size] :
       std::vector<std::pair<Shape, std::pair<int64_t, int64_t>>>{{Shape({1, 1, 1, 1}), {1, 1}},
                                                                  {Shape({2, 3, 5, 7}), {3, 2}},
                                                                  {Shape({1, 2, 2, 3}), {3, 5}}}) {
    TensorMap env;
    env.emplace("x", RandomTensor(TensorDesc(shape, DT_DOUBLE), 8));
    Status status = CheckOpGradient(AdaptivePool(size.first, size.second), env);
    EXPECT_TRUE(status.ok()) << status << shape;
  }
}

OpConf Bce() {
  return OpConfBuilder("binary_cross_entropy_with_logits", "bce")
      .Input("x", "x")
      .Input("target", "t")
      .Output("out")
      .Build();
}

TEST(BceKernelTest, MatchesTheNaiveFormulaAndStaysFiniteForLargeLogits) {
  for (DataType dtype : FloatTypes()) {
    for (const Shape& shape : {Shape({0}), Shape({1}), Shape({3, 5})}) {
      TensorMap env;
      env.emplace("x", RandomTensor(TensorDesc(shape, dtype), 9, -6, 6));
      env.emplace("t", RandomTensor(TensorDesc(shape, dtype), 10, 0, 1));
      TensorMap out = MustRun(Bce(), &env);
      const std::vector<double> x = ToDoubles(env.at("x")), t = ToDoubles(env.at("t"));
      std::vector<double> want;
      for (size_t i = 0; i < x.size(); ++i) {
        const double s = 1 / (1 + std::exp(-x[i]));
        want.push_back(-t[i] * std::log(s) - (1 - t[i]) * std::log(1 - s));
      }
      ExpectAllNear(out.at("bce/out_0"), want, 10 * testing::Tolerance(dtype), shape.ToString());
    }
  }
  TensorMap env;
  HostTensor x(TensorDesc(Shape({2}), DT_FLOAT)), t(TensorDesc(Shape({2}), DT_FLOAT));
  x.data<float>()[0] = 200.f;
  x.data<float>()[1] = -200.f;
  t.data<float>()[0] = 0.f;
  t.data<float>()[1] = 0.f;
  env.emplace("x", std::move(x));
  env.emplace("t", std::move(t));
  TensorMap out = MustRun(Bce(), &env);
  EXPECT_EQ(ToDoubles(out.at("bce/out_0")), (std::vector<double>{200.0, 0.0}));
}

TEST(BceGradTest, FiniteDifferencesForLogitsAndTargets) {
  for (const Shape& shape : {Shape({1}), Shape({3, 5}), Shape({7})}) {
    TensorMap env;
    env.emplace("x", RandomTensor(TensorDesc(shape, DT_DOUBLE), 11, -4, 4));
    env.emplace("t", RandomTensor(TensorDesc(shape, DT_DOUBLE), 12, 0, 1));
    Status status = CheckOpGradient(Bce(), env);
    EXPECT_TRUE(status.ok()) << status << shape;
  }
}

TEST(IndexPoolLossSbpTest, EveryOfferedSignatureAgreesWithOneDevice) {
  struct Case {
    OpConf op;
    std::map<std::string, TensorDesc> inputs;
    size_t min_signatures;
  };
  const TensorDesc i32(Shape({6, 5}), DT_INT32);
  std::vector<Case> cases = {
      {OpConfBuilder("one_hot", "oh")
           .Input("indices", "i")
           .Output("out")
           .Attr("depth", int64_t{4})
           .Build(),
       {{"i", i32}},
       2},
      {Gather(), {{"x", TensorDesc(Shape({4, 6, 3}), DT_DOUBLE)}, {"i", i32}}, 4},
      {OpConfBuilder("gather_grad", "gg")
           .Input("dy", "dy")
           .Input("indices", "i")
           .Input("like", "x")
           .Output("dx")
           .Build(),
       {{"dy", TensorDesc(Shape({6, 5, 6, 3}), DT_DOUBLE)},
        {"i", i32},
        {"x", TensorDesc(Shape({4, 6, 3}), DT_DOUBLE)}},
       4},
      {AdaptivePool(2, 3), {{"x", TensorDesc(Shape({6, 6, 5, 4}), DT_DOUBLE)}}, 2},
      {OpConfBuilder("adaptive_avg_pool2d_grad", "apg")
           .Input("dy", "dy")
           .Input("like", "x")
           .Output("dx")
           .Attr("output_size", std::vector<int64_t>{2, 3})
           .Build(),
       {{"dy", TensorDesc(Shape({6, 6, 2, 3}), DT_DOUBLE)},
        {"x", TensorDesc(Shape({6, 6, 5, 4}), DT_DOUBLE)}},
       3},
      {Bce(),
       {{"x", TensorDesc(Shape({6, 5}), DT_DOUBLE)}, {"t", TensorDesc(Shape({6, 5}), DT_DOUBLE)}},
       2},
      {OpConfBuilder("binary_cross_entropy_with_logits_grad", "bg")
           .Input("dy", "dy")
           .Input("x", "x")
           .Input("target", "t")
           .Output("dx")
           .Output("dtarget")
           .Build(),
       {{"dy", TensorDesc(Shape({6, 5}), DT_DOUBLE)},
        {"x", TensorDesc(Shape({6, 5}), DT_DOUBLE)},
        {"t", TensorDesc(Shape({6, 5}), DT_DOUBLE)}},
       3},
  };
  for (const Case& c : cases) {
    TensorMap env;
    uint64_t seed = 60;
    for (const auto& [lbn, desc] : c.inputs) env.emplace(lbn, RandomTensor(desc, ++seed, 0, 4));
    for (int64_t n : {2, 3}) {
      auto result = CheckSbpSignatures(c.op, env, n);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_GE(result->signatures.size(), c.min_signatures) << c.op.op_type();
    }
  }
}

}  // namespace
}  // namespace nn
}  // namespace oflite
