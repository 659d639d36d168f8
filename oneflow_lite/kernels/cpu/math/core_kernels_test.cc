// Compares the core math kernels (matmul, bias_add, add, relu, reductions,
// broadcast_like, reshape/flatten, identity) against direct reference
// computations on random inputs, in float32 and float64.
#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace math {
namespace {

class CoreKernelTest : public ::testing::TestWithParam<DataType> {
 protected:
  DataType dtype() const { return GetParam(); }
  double tol() const { return Tolerance(dtype()); }
  HostTensor Random(const Shape& shape, uint64_t seed) {
    return RandomTensor(TensorDesc(shape, dtype()), seed);
  }
};

// Reference: out[i][j] = alpha * sum_k A[i][k] B[k][j] with A/B read through
// the transposes.
std::vector<double> ReferenceMatmul(const HostTensor& a, const HostTensor& b, bool ta, bool tb,
                                    double alpha) {
  const std::vector<double> av = ToDoubles(a), bv = ToDoubles(b);
  const int64_t m = a.shape().dim(ta ? 1 : 0), k = a.shape().dim(ta ? 0 : 1);
  const int64_t n = b.shape().dim(tb ? 0 : 1);
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta ? av[p * m + i] : av[i * k + p];
        const double y = tb ? bv[j * k + p] : bv[p * n + j];
        sum += x * y;
      }
      out[i * n + j] = alpha * sum;
    }
  }
  return out;
}

TEST_P(CoreKernelTest, MatmulMatchesReferenceForAllTransposes) {
  const std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {3, 5, 7}, {7, 1, 9},
                                                     {4, 0, 3}, {2, 6, 1}, {33, 130, 65}};
  uint64_t seed = 1;
  for (const auto& [m, k, n] : sizes) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const double alpha = t == 3 ? 0.5 : 1.0;
      TensorMap env;
      env.emplace("a", Random(ta ? Shape({k, m}) : Shape({m, k}), ++seed));
      env.emplace("b", Random(tb ? Shape({n, k}) : Shape({k, n}), ++seed));
      OpConf op = OpConfBuilder("matmul", "mm")
                      .Input("a", "a")
                      .Input("b", "b")
                      .Output("out")
                      .Attr("transpose_a", ta)
                      .Attr("transpose_b", tb)
                      .Attr("alpha", alpha)
                      .Build();
      auto out = RunSingle(op, &env, "mm/out_0");
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->shape(), Shape({m, n}));
      EXPECT_EQ(CompareValues(ToDoubles(*out),
                              ReferenceMatmul(env.at("a"), env.at("b"), ta, tb, alpha), tol()),
                "")
          << "m=" << m << " k=" << k << " n=" << n << " ta=" << ta << " tb=" << tb;
    }
  }
}

TEST_P(CoreKernelTest, BiasAddAlongEveryAxis) {
  const std::vector<Shape> shapes = {Shape({1, 1}), Shape({3, 5}), Shape({7, 1, 9}), Shape({4})};
  uint64_t seed = 10;
  for (const Shape& shape : shapes) {
    for (int64_t axis = 0; axis < shape.rank(); ++axis) {
      TensorMap env;
      env.emplace("a", Random(shape, ++seed));
      env.emplace("b", Random(Shape({shape.dim(axis)}), ++seed));
      OpConf op = OpConfBuilder("bias_add", "ba")
                      .Input("a", "a")
                      .Input("b", "b")
                      .Output("out")
                      .Attr("axis", axis)
                      .Build();
      auto out = RunSingle(op, &env, "ba/out_0");
      ASSERT_TRUE(out.ok()) << out.status();
      const std::vector<double> a = ToDoubles(env.at("a")), b = ToDoubles(env.at("b"));
      std::vector<double> want(a.size());
      for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + b[Unravel(i, shape)[axis]];
      EXPECT_EQ(CompareValues(ToDoubles(*out), want, tol()), "") << shape << " axis " << axis;
    }
  }
}

TEST_P(CoreKernelTest, AddOfOneTwoAndFourInputs) {
  for (int count : {1, 2, 4}) {
    TensorMap env;
    std::vector<std::string> lbns;
    std::vector<double> want(3 * 5, 0.0);
    for (int k = 0; k < count; ++k) {
      lbns.push_back("in" + std::to_string(k));
      env.emplace(lbns.back(), Random(Shape({3, 5}), 20 + k));
      const std::vector<double> v = ToDoubles(env.at(lbns.back()));
      for (size_t i = 0; i < v.size(); ++i) want[i] += v[i];
    }
    OpConf op = OpConfBuilder("add", "sum").Input("in", lbns).Output("out").Build();
    auto out = RunSingle(op, &env, "sum/out_0");
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(CompareValues(ToDoubles(*out), want, tol()), "") << count << " inputs";
  }
}

TEST_P(CoreKernelTest, ReluAndReluGrad) {
  TensorMap env;
  env.emplace("x", Random(Shape({7, 1, 9}), 30));
  env.emplace("dy", Random(Shape({7, 1, 9}), 31));
  auto y = RunSingle(OpConfBuilder("relu", "r").Input("x", "x").Output("y").Build(), &env, "r/y_0");
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<double> x = ToDoubles(env.at("x")), dy = ToDoubles(env.at("dy"));
  std::vector<double> want_y(x.size()), want_dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want_y[i] = x[i] > 0 ? x[i] : 0;
    want_dx[i] = x[i] > 0 ? dy[i] : 0;
  }
  EXPECT_EQ(CompareValues(ToDoubles(*y), want_y, 0), "");
  env.emplace("y", std::move(*y));
  auto dx = RunSingle(
      OpConfBuilder("relu_grad", "rg").Input("dy", "dy").Input("y", "y").Output("dx").Build(), &env,
      "rg/dx_0");
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(CompareValues(ToDoubles(*dx), want_dx, 0), "");
}

// Reference reduction by scattering every element to its output position.
std::vector<double> ReferenceReduce(const HostTensor& x, const std::vector<int64_t>& axes,
                                    bool mean) {
  std::vector<int64_t> kept = x.shape().dims();
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= kept[a];
    kept[a] = 1;
  }
  const Shape kept_shape(kept);
  std::vector<double> out(kept_shape.elem_count(), 0.0);
  const std::vector<double> v = ToDoubles(x);
  for (size_t i = 0; i < v.size(); ++i) {
    std::vector<int64_t> index = Unravel(i, x.shape());
    for (int64_t a : axes) index[a] = 0;
    out[Ravel(index, kept_shape)] += v[i];
  }
  if (mean) {
    for (double& o : out) o /= count;
  }
  return out;
}

TEST_P(CoreKernelTest, ReduceSumAndMeanOverAxisSubsets) {
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {
      {Shape({1, 1}), {}},           {Shape({3, 5}), {0}},        {Shape({3, 5}), {1}},
      {Shape({3, 5}), {}},           {Shape({7, 1, 9}), {0, 2}},  {Shape({7, 1, 9}), {1}},
      {Shape({2, 3, 4, 5}), {1, 3}}, {Shape({2, 3, 4, 5}), {-1}}, {Shape({4, 0, 3}), {1}},
  };
  uint64_t seed = 40;
  for (const Case& c : cases) {
    for (bool mean : {false, true}) {
      for (bool keepdims : {false, true}) {
        TensorMap env;
        env.emplace("x", Random(c.shape, ++seed));
        OpConf op = OpConfBuilder(mean ? "reduce_mean" : "reduce_sum", "red")
                        .Input("x", "x")
                        .Output("y")
                        .Attr("axis", c.axes)
                        .Attr("keepdims", keepdims)
                        .Build();
        auto y = RunSingle(op, &env, "red/y_0");
        ASSERT_TRUE(y.ok()) << y.status();
        std::vector<int64_t> axes;
        for (int64_t a : c.axes) axes.push_back(a < 0 ? a + c.shape.rank() : a);
        if (axes.empty()) {
          for (int64_t i = 0; i < c.shape.rank(); ++i) axes.push_back(i);
        }
        std::vector<int64_t> expected_dims;
        for (int64_t i = 0; i < c.shape.rank(); ++i) {
          const bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
          if (!reduced) expected_dims.push_back(c.shape.dim(i));
          if (reduced && keepdims) expected_dims.push_back(1);
        }
        EXPECT_EQ(y->shape(), Shape(expected_dims));
        EXPECT_EQ(CompareValues(ToDoubles(*y), ReferenceReduce(env.at("x"), axes, mean), tol()), "")
            << c.shape << " mean=" << mean;
      }
    }
  }
}

TEST_P(CoreKernelTest, BroadcastLikeSqueezedKeptAndNumpyForms) {
  struct Case {
    Shape x, like;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {
      {Shape({5}), Shape({3, 5}), {0}},          {Shape({3}), Shape({3, 5}), {1}},
      {Shape({1, 5}), Shape({3, 5}), {0}},       {Shape({}), Shape({7, 1, 9}), {0, 1, 2}},
      {Shape({7, 1, 1}), Shape({7, 1, 9}), {2}}, {Shape({1, 9}), Shape({7, 3, 9}), {}},
      {Shape({1}), Shape({1, 1}), {}},
  };
  uint64_t seed = 60;
  for (const Case& c : cases) {
    TensorMap env;
    env.emplace("x", Random(c.x, ++seed));
    env.emplace("like", Random(c.like, ++seed));
    OpConf op = OpConfBuilder("broadcast_like", "bl")
                    .Input("x", "x")
                    .Input("like", "like")
                    .Output("y")
                    .Attr("axis", c.axes)
                    .Build();
    auto y = RunSingle(op, &env, "bl/y_0");
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->shape(), c.like);
    // Reference: drop/zero the broadcast axes of the like index.
    const std::vector<double> xv = ToDoubles(env.at("x"));
    std::vector<double> want(c.like.elem_count());
    for (int64_t i = 0; i < c.like.elem_count(); ++i) {
      std::vector<int64_t> index = Unravel(i, c.like), x_index;
      const int64_t lead = c.like.rank() - c.x.rank();
      for (int64_t d = 0; d < c.like.rank(); ++d) {
        const bool listed = std::find(c.axes.begin(), c.axes.end(), d) != c.axes.end();
        if (c.axes.empty()) {
          if (d >= lead) x_index.push_back(c.x.dim(d - lead) == 1 ? 0 : index[d]);
        } else if (c.x.rank() == c.like.rank()) {
          x_index.push_back(listed ? 0 : index[d]);
        } else if (!listed) {
          x_index.push_back(index[d]);
        }
      }
      want[i] = xv[Ravel(x_index, c.x)];
    }
    EXPECT_EQ(CompareValues(ToDoubles(*y), want, 0), "") << c.x << " -> " << c.like;
  }
}

TEST_P(CoreKernelTest, ReshapeFlattenIdentityCopyValues) {
  TensorMap env;
  env.emplace("x", Random(Shape({2, 3, 5}), 70));
  const std::vector<double> x = ToDoubles(env.at("x"));
  auto r = RunSingle(OpConfBuilder("reshape", "r")
                         .Input("x", "x")
                         .Output("y")
                         .Attr("shape", Shape({5, -1}))
                         .Build(),
                     &env, "r/y_0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shape(), Shape({5, 6}));
  EXPECT_EQ(ToDoubles(*r), x);
  auto f =
      RunSingle(OpConfBuilder("flatten", "f").Input("x", "x").Output("y").Build(), &env, "f/y_0");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->shape(), Shape({2, 15}));
  EXPECT_EQ(ToDoubles(*f), x);
  auto i = RunSingle(OpConfBuilder("identity", "i").Input("in", "x").Output("out").Build(), &env,
                     "i/out_0");
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->shape(), Shape({2, 3, 5}));
  EXPECT_EQ(ToDoubles(*i), x);
}

// Blobs that disagree with each other (a planner bug or corrupt plan) give an
// error naming the op and the shapes, not a crash.
TEST(KernelErrorTest, MatmulWithInconsistentBlobsReturnsError) {
  OpConf op =
      OpConfBuilder("matmul", "dense7").Input("a", "a").Input("b", "b").Output("out").Build();
  CpuDeviceContext cpu;
  KernelInitContext init;
  init.op = &op;
  init.device = &cpu;
  auto kernel = CreateAndInitKernel(init, DEVICE_CPU, DT_FLOAT);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  HostTensor a(TensorDesc(Shape({3, 5}), DT_FLOAT)), b(TensorDesc(Shape({4, 7}), DT_FLOAT));
  HostTensor out(TensorDesc(Shape({3, 7}), DT_FLOAT));
  Blob a_blob = a.AsBlob(), b_blob = b.AsBlob(), out_blob = out.AsBlob();
  KernelContext ctx(op, &cpu, 3);
  ctx.BindInput("a", &a_blob);
  ctx.BindInput("b", &b_blob);
  ctx.BindOutput("out", &out_blob);
  Status status = (*kernel)->Forward(&ctx);
  ASSERT_FALSE(status.ok());
  for (const char* piece : {"dense7", "(3, 5)", "(4, 7)"}) {
    EXPECT_NE(status.message().find(piece), std::string::npos) << status;
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, CoreKernelTest, ::testing::Values(DT_FLOAT, DT_DOUBLE),
                         [](const auto& info) { return std::string(DataTypeName(info.param)); });

}  // namespace
}  // namespace math
}  // namespace oflite
