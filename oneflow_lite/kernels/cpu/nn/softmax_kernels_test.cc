#include <cmath>

#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

// Reference softmax / log_softmax along `axis` of `shape`.
std::vector<double> ReferenceSoftmax(const std::vector<double>& x, const Shape& shape, int64_t axis,
                                     bool log) {
  const int64_t outer = shape.Count(0, axis), size = shape.dim(axis), inner = shape.Count(axis + 1);
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0;
      for (int64_t d = 0; d < size; ++d) sum += std::exp(x[(o * size + d) * inner + i]);
      for (int64_t d = 0; d < size; ++d) {
        const int64_t k = (o * size + d) * inner + i;
        y[k] = log ? x[k] - std::log(sum) : std::exp(x[k]) / sum;
      }
    }
  }
  return y;
}

OpConf SoftmaxOp(const std::string& type, int64_t axis) {
  return OpConfBuilder(type, "sm").Input("x", "in/x_0").Output("y").Attr("axis", axis).Build();
}

TEST(SoftmaxKernelTest, MatchesReferenceOverShapesAndAxes) {
  struct Case {
    Shape shape;
    int64_t axis;  // as given to the op
    int64_t normalized;
  };
  const std::vector<Case> cases = {{Shape({1, 1}), -1, 1},
                                   {Shape({3, 5}), -1, 1},
                                   {Shape({3, 5}), 0, 0},
                                   {Shape({2, 3, 7}), 1, 1},
                                   {Shape({7}), 0, 0}};
  for (const std::string type : {"softmax", "log_softmax"}) {
    for (DataType dtype : FloatTypes()) {
      for (const Case& c : cases) {
        TensorMap env;
        env.emplace("in/x_0", RandomTensor(TensorDesc(c.shape, dtype), 11, -3, 3));
        std::vector<double> x = ToDoubles(env.at("in/x_0"));
        TensorMap out = MustRun(SoftmaxOp(type, c.axis), &env);
        ExpectAllNear(out.at("sm/y_0"),
                      ReferenceSoftmax(x, c.shape, c.normalized, type == "log_softmax"),
                      Tolerance(dtype), type + " " + c.shape.ToString());
      }
    }
  }
}

TEST(SoftmaxKernelTest, StableForLargeLogits) {
  TensorMap env;
  env.emplace("in/x_0", HostTensor::FromVector<float>(Shape({1, 2}), {1000.f, 1001.f}));
  TensorMap out = MustRun(SoftmaxOp("softmax", -1), &env);
  const double e = std::exp(1.0);
  ExpectAllNear(out.at("sm/y_0"), {1 / (1 + e), e / (1 + e)}, 1e-6);
  out = MustRun(SoftmaxOp("log_softmax", -1), &env);
  ExpectAllNear(out.at("sm/y_0"), {-std::log1p(e), 1 - std::log1p(e)}, 1e-6);
}

TEST(SoftmaxKernelTest, GradientsMatchFiniteDifferences) {
  for (const std::string type : {"softmax", "log_softmax"}) {
    for (int64_t axis : {-1, 0, 1}) {
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(Shape({3, 4, 5}), DT_DOUBLE), 3));
      EXPECT_TRUE(CheckOpGradient(SoftmaxOp(type, axis), env).ok())
          << type << " axis " << axis << ": " << CheckOpGradient(SoftmaxOp(type, axis), env);
    }
  }
}

TEST(SoftmaxKernelTest, GradShapeMismatchNamesOpAndShapes) {
  TensorMap env;
  env.emplace("a/dy_0", HostTensor(TensorDesc(Shape({2, 3}), DT_FLOAT)));
  env.emplace("a/y_0", HostTensor(TensorDesc(Shape({2, 4}), DT_FLOAT)));
  OpConf op = OpConfBuilder("softmax_grad", "my_grad")
                  .Input("dy", "a/dy_0")
                  .Input("y", "a/y_0")
                  .Output("dx")
                  .Build();
  const std::string error = RunError(op, &env);
  EXPECT_NE(error.find("my_grad"), std::string::npos) << error;
  EXPECT_NE(error.find("(2, 3)"), std::string::npos) << error;
  EXPECT_NE(error.find("(2, 4)"), std::string::npos) << error;
}

OpConf XentOp() {
  return OpConfBuilder("sparse_softmax_cross_entropy", "xent")
      .Input("prediction", "in/p_0")
      .Input("label", "in/l_0")
      .Output("prob")
      .Output("out")
      .Build();
}

TEST(SparseSoftmaxCrossEntropyKernelTest, MatchesReference) {
  for (DataType dtype : FloatTypes()) {
    for (DataType label_type : {DT_INT32, DT_INT64}) {
      for (int64_t rows : {0, 1, 5}) {
        const int64_t classes = 7;
        TensorMap env;
        env.emplace("in/p_0", RandomTensor(TensorDesc(Shape({rows, classes}), dtype), 5, -4, 4));
        env.emplace("in/l_0", RandomTensor(TensorDesc(Shape({rows}), label_type), 6, 0, classes));
        std::vector<double> p = ToDoubles(env.at("in/p_0"));
        std::vector<double> label = ToDoubles(env.at("in/l_0"));
        TensorMap out = MustRun(XentOp(), &env);
        std::vector<double> prob = ReferenceSoftmax(p, Shape({rows, classes}), 1, false);
        std::vector<double> loss(rows);
        for (int64_t n = 0; n < rows; ++n) {
          loss[n] = -std::log(prob[n * classes + static_cast<int64_t>(label[n])]);
        }
        ExpectAllNear(out.at("xent/prob_0"), prob, Tolerance(dtype), "prob");
        ExpectAllNear(out.at("xent/out_0"), loss, Tolerance(dtype), "out");
      }
    }
  }
}

TEST(SparseSoftmaxCrossEntropyKernelTest, StableForLargeLogits) {
  TensorMap env;
  env.emplace("in/p_0", HostTensor::FromVector<float>(Shape({1, 2}), {1000.f, 0.f}));
  env.emplace("in/l_0", HostTensor::FromVector<int32_t>(Shape({1}), {1}));
  TensorMap out = MustRun(XentOp(), &env);
  ExpectAllNear(out.at("xent/out_0"), {1000.0}, 1e-6);
}

TEST(SparseSoftmaxCrossEntropyKernelTest, BadLabelNamesOpLabelAndPosition) {
  TensorMap env;
  env.emplace("in/p_0", RandomTensor(TensorDesc(Shape({3, 4}), DT_FLOAT), 1));
  env.emplace("in/l_0", HostTensor::FromVector<int64_t>(Shape({3}), {0, 3, 4}));
  const std::string error = RunError(XentOp(), &env);
  EXPECT_NE(error.find("'xent'"), std::string::npos) << error;
  EXPECT_NE(error.find("label 4 at position 2"), std::string::npos) << error;
}

TEST(SparseSoftmaxCrossEntropyKernelTest, LabelShapeMismatchNamesBothShapes) {
  TensorMap env;
  env.emplace("in/p_0", RandomTensor(TensorDesc(Shape({3, 4}), DT_FLOAT), 1));
  env.emplace("in/l_0", HostTensor(TensorDesc(Shape({2}), DT_INT32)));
  const std::string error = RunError(XentOp(), &env);
  EXPECT_NE(error.find("xent"), std::string::npos) << error;
  EXPECT_NE(error.find("(3, 4)"), std::string::npos) << error;
  EXPECT_NE(error.find("(2,)"), std::string::npos) << error;
}

// The usual training path: only the loss receives a gradient (no dprob).
TEST(SparseSoftmaxCrossEntropyKernelTest, GradOpWithOnlyDyIsProbMinusOneHot) {
  for (DataType dtype : FloatTypes()) {
    TensorMap env;
    env.emplace("in/dy_0", RandomTensor(TensorDesc(Shape({3}), dtype), 1));
    env.emplace("in/prob_0", RandomTensor(TensorDesc(Shape({3, 4}), dtype), 2, 0, 1));
    env.emplace("in/l_0", HostTensor::FromVector<int32_t>(Shape({3}), {3, 0, 1}));
    const std::vector<double> dy = ToDoubles(env.at("in/dy_0"));
    std::vector<double> expected = ToDoubles(env.at("in/prob_0"));
    const int labels[3] = {3, 0, 1};
    for (int n = 0; n < 3; ++n) {
      for (int c = 0; c < 4; ++c) {
        expected[n * 4 + c] = dy[n] * (expected[n * 4 + c] - (c == labels[n] ? 1 : 0));
      }
    }
    OpConf op = OpConfBuilder("sparse_softmax_cross_entropy_grad", "xg")
                    .Input("dy", "in/dy_0")
                    .Input("prob", "in/prob_0")
                    .Input("label", "in/l_0")
                    .Output("dx")
                    .Build();
    ExpectAllNear(MustRun(op, &env).at("xg/dx_0"), expected, Tolerance(dtype));
  }
}

TEST(SparseSoftmaxCrossEntropyKernelTest, GradientOfLossAndProbMatchesFiniteDifferences) {
  for (DataType label_type : {DT_INT32, DT_INT64}) {
    TensorMap env;
    env.emplace("in/p_0", RandomTensor(TensorDesc(Shape({5, 3}), DT_DOUBLE), 9, -2, 2));
    env.emplace("in/l_0", RandomTensor(TensorDesc(Shape({5}), label_type), 10, 0, 3));
    GradCheckOptions options;
    options.skip_inputs = {"label"};
    Status status = CheckOpGradient(XentOp(), env, options);
    EXPECT_TRUE(status.ok()) << status;
  }
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
