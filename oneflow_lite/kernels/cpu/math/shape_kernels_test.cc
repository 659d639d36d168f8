// Layout kernels (transpose, concat, slice, slice_grad, reshape, flatten)
// against index-arithmetic references, for float and integer dtypes.
#include <gtest/gtest.h>

#include "oneflow_lite/kernels/cpu/math/strided_loop.h"
#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"

namespace oflite {
namespace math {
namespace {

class ShapeKernelTest : public ::testing::TestWithParam<DataType> {
 protected:
  HostTensor Random(const Shape& shape, uint64_t seed) {
    return RandomTensor(TensorDesc(shape, GetParam()), seed, -100, 100);
  }
};

TEST_P(ShapeKernelTest, TransposeEveryPermutationOfRank3) {
  const Shape shape({7, 1, 9});
  std::vector<int64_t> perm = {0, 1, 2};
  TensorMap env;
  env.emplace("x", Random(shape, 1));
  const std::vector<double> x = ToDoubles(env.at("x"));
  do {
    auto y = RunSingle(
        OpConfBuilder("transpose", "t").Input("x", "x").Output("y").Attr("perm", perm).Build(),
        &env, "t/y_0");
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<double> want(x.size());
    for (int64_t i = 0; i < y->elem_count(); ++i) {
      const std::vector<int64_t> out_index = Unravel(i, y->shape());
      std::vector<int64_t> in_index(3);
      for (int j = 0; j < 3; ++j) in_index[perm[j]] = out_index[j];
      want[i] = x[Ravel(in_index, shape)];
    }
    EXPECT_EQ(ToDoubles(*y), want) << Shape(perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST_P(ShapeKernelTest, Transpose2DAndRank4) {
  for (const auto& [shape, perm] :
       std::vector<std::pair<Shape, std::vector<int64_t>>>{{Shape({3, 5}), {1, 0}},
                                                           {Shape({1, 1}), {1, 0}},
                                                           {Shape({2, 3, 4, 5}), {0, 2, 3, 1}},
                                                           {Shape({67, 131}), {1, 0}},
                                                           {Shape({3, 40, 33}), {2, 1, 0}},
                                                           {Shape({5, 37, 70}), {0, 2, 1}}}) {
    TensorMap env;
    env.emplace("x", Random(shape, 2));
    auto y = RunSingle(
        OpConfBuilder("transpose", "t").Input("x", "x").Output("y").Attr("perm", perm).Build(),
        &env, "t/y_0");
    ASSERT_TRUE(y.ok()) << y.status();
    const std::vector<double> x = ToDoubles(env.at("x"));
    std::vector<double> want(x.size());
    for (int64_t i = 0; i < y->elem_count(); ++i) {
      const std::vector<int64_t> out_index = Unravel(i, y->shape());
      std::vector<int64_t> in_index(perm.size());
      for (size_t j = 0; j < perm.size(); ++j) in_index[perm[j]] = out_index[j];
      want[i] = x[Ravel(in_index, shape)];
    }
    EXPECT_EQ(ToDoubles(*y), want) << shape;
  }
}

TEST_P(ShapeKernelTest, ConcatAlongEachAxis) {
  for (int64_t axis = 0; axis < 3; ++axis) {
    std::vector<Shape> shapes;
    for (int64_t extent : {2, 1, 3}) {
      std::vector<int64_t> dims = {3, 5, 4};
      dims[axis] = extent;
      shapes.emplace_back(dims);
    }
    TensorMap env;
    std::vector<std::string> lbns;
    for (size_t k = 0; k < shapes.size(); ++k) {
      lbns.push_back("in" + std::to_string(k));
      env.emplace(lbns.back(), Random(shapes[k], 10 + k));
    }
    auto out = RunSingle(
        OpConfBuilder("concat", "c").Input("in", lbns).Output("out").Attr("axis", axis).Build(),
        &env, "c/out_0");
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> want(out->elem_count());
    for (int64_t i = 0; i < out->elem_count(); ++i) {
      std::vector<int64_t> index = Unravel(i, out->shape());
      size_t k = 0;
      while (index[axis] >= shapes[k].dim(axis)) index[axis] -= shapes[k++].dim(axis);
      want[i] = ToDoubles(env.at(lbns[k]))[Ravel(index, shapes[k])];
    }
    EXPECT_EQ(ToDoubles(*out), want) << "axis " << axis;
  }
}

TEST_P(ShapeKernelTest, SliceAndSliceGradAreAdjoint) {
  const Shape shape({7, 1, 9});
  const std::vector<int64_t> start = {-6, 0, 1}, stop = {7, 1, 100}, step = {2, 1, 3};
  TensorMap env;
  env.emplace("x", Random(shape, 20));
  auto y = RunSingle(OpConfBuilder("slice", "s")
                         .Input("x", "x")
                         .Output("y")
                         .Attr("start", start)
                         .Attr("stop", stop)
                         .Attr("step", step)
                         .Build(),
                     &env, "s/y_0");
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->shape(), Shape({3, 1, 3}));
  const std::vector<double> x = ToDoubles(env.at("x"));
  std::vector<double> want(y->elem_count());
  const std::vector<int64_t> first = {1, 0, 1};
  for (int64_t i = 0; i < y->elem_count(); ++i) {
    std::vector<int64_t> index = Unravel(i, y->shape());
    for (int d = 0; d < 3; ++d) index[d] = first[d] + index[d] * step[d];
    want[i] = x[Ravel(index, shape)];
  }
  EXPECT_EQ(ToDoubles(*y), want);

  env.emplace("dy", std::move(*y));
  auto dx = RunSingle(OpConfBuilder("slice_grad", "sg")
                          .Input("dy", "dy")
                          .Input("like", "x")
                          .Output("dx")
                          .Attr("start", start)
                          .Attr("stop", stop)
                          .Attr("step", step)
                          .Build(),
                      &env, "sg/dx_0");
  ASSERT_TRUE(dx.ok()) << dx.status();
  // Scattering the slice back keeps exactly the sliced elements of x.
  std::vector<double> want_dx(x.size(), 0.0);
  for (int64_t i = 0; i < 9; ++i) {
    std::vector<int64_t> index = Unravel(i, Shape({3, 1, 3}));
    for (int d = 0; d < 3; ++d) index[d] = first[d] + index[d] * step[d];
    want_dx[Ravel(index, shape)] = x[Ravel(index, shape)];
  }
  EXPECT_EQ(ToDoubles(*dx), want_dx);
}

TEST_P(ShapeKernelTest, EmptySliceAndReshapes) {
  TensorMap env;
  env.emplace("x", Random(Shape({3, 5}), 30));
  auto empty = RunSingle(OpConfBuilder("slice", "s")
                             .Input("x", "x")
                             .Output("y")
                             .Attr("start", std::vector<int64_t>{2, 0})
                             .Attr("stop", std::vector<int64_t>{1, 5})
                             .Build(),
                         &env, "s/y_0");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->shape(), Shape({0, 5}));
  auto reshaped = RunSingle(OpConfBuilder("reshape", "r")
                                .Input("x", "x")
                                .Output("y")
                                .Attr("shape", Shape({5, 1, 3}))
                                .Build(),
                            &env, "r/y_0");
  ASSERT_TRUE(reshaped.ok()) << reshaped.status();
  EXPECT_EQ(ToDoubles(*reshaped), ToDoubles(env.at("x")));
  env.emplace("like", Random(Shape({15}), 31));
  auto like = RunSingle(
      OpConfBuilder("reshape_like", "rl").Input("x", "x").Input("like", "like").Output("y").Build(),
      &env, "rl/y_0");
  ASSERT_TRUE(like.ok()) << like.status();
  EXPECT_EQ(like->shape(), Shape({15}));
  EXPECT_EQ(ToDoubles(*like), ToDoubles(env.at("x")));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ShapeKernelTest,
                         ::testing::Values(DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64),
                         [](const auto& info) { return std::string(DataTypeName(info.param)); });

TEST(StridedLoopTest, MergesContiguousAxesAndDropsOnes) {
  const Shape shape({2, 1, 3, 4});
  StridedLoop loop(shape.dims(), {ContiguousStrides(shape), ContiguousStrides(shape)});
  int rows = 0;
  int64_t total = 0;
  loop.ForEachRow([&](const int64_t* offsets, int64_t n) {
    ++rows;
    total += n;
    EXPECT_EQ(offsets[0], 0);
  });
  EXPECT_EQ(rows, 1);
  EXPECT_EQ(total, 24);
  // Broadcasting the last axis: rows of 4 with stride 0 on the second operand.
  StridedLoop broadcast({3, 4}, {{4, 1}, {1, 0}});
  EXPECT_EQ(broadcast.InnerStride(1), 0);
  std::vector<int64_t> starts;
  broadcast.ForEachRow([&](const int64_t* offsets, int64_t n) {
    EXPECT_EQ(n, 4);
    starts.push_back(offsets[1]);
  });
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 1, 2}));
  StridedLoop empty({3, 0}, {{0, 1}});
  bool called = false;
  empty.ForEachRow([&](const int64_t*, int64_t) { called = true; });
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace math
}  // namespace oflite
