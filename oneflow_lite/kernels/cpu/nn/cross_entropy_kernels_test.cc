// sparse_softmax_cross_entropy(+grad) over prediction [..., C] and label
// [...]: inference and its errors, values against a naive double reference
// (sizes 0, 1 and odd, class counts on both sides of the 16-lane blocks,
// float32 and float64, int32 and int64 labels), the threaded row split,
// bad labels naming op, label, position and multi-index, finite-difference
// gradients, and every offered SBP signature on 2 and 3 devices.
#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
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
using testing::Tolerance;

OpConf Xent() {
  return OpConfBuilder("sparse_softmax_cross_entropy", "xent")
      .Input("prediction", "p")
      .Input("label", "l")
      .Output("prob")
      .Output("out")
      .Build();
}

OpConf XentGrad(bool with_dprob) {
  OpConfBuilder b("sparse_softmax_cross_entropy_grad", "xg");
  b.Input("dy", "dy").Input("prob", "prob").Input("label", "l");
  if (with_dprob) b.Input("dprob", "dprob");
  return b.Output("dx").Build();
}

// [..., C] -> [...].
Shape Leading(const Shape& shape) {
  std::vector<int64_t> dims = shape.dims();
  dims.pop_back();
  return Shape(dims);
}

struct Reference {
  std::vector<double> prob, loss;
};

// softmax and -log softmax[label] per row, in double, the naive way.
Reference NaiveXent(const std::vector<double>& x, const std::vector<double>& label,
                    int64_t classes) {
  Reference r;
  r.prob.resize(x.size());
  for (size_t n = 0; n < label.size(); ++n) {
    double max_value = -INFINITY, sum = 0;
    for (int64_t c = 0; c < classes; ++c) max_value = std::max(max_value, x[n * classes + c]);
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[n * classes + c] - max_value);
    for (int64_t c = 0; c < classes; ++c) {
      r.prob[n * classes + c] = std::exp(x[n * classes + c] - max_value) / sum;
    }
    r.loss.push_back(std::log(sum) + max_value - x[n * classes + static_cast<int64_t>(label[n])]);
  }
  return r;
}

std::vector<double> NaiveXentGrad(const std::vector<double>& dy, const std::vector<double>& prob,
                                  const std::vector<double>& label,
                                  const std::vector<double>* dprob, int64_t classes) {
  std::vector<double> dx(prob.size());
  for (size_t n = 0; n < label.size(); ++n) {
    double dot = 0;
    for (int64_t c = 0; c < classes && dprob != nullptr; ++c) {
      dot += (*dprob)[n * classes + c] * prob[n * classes + c];
    }
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t k = n * classes + c;
      dx[k] = dy[n] * (prob[k] - (c == label[n] ? 1 : 0));
      if (dprob != nullptr) dx[k] += prob[k] * ((*dprob)[k] - dot);
    }
  }
  return dx;
}

TEST(CrossEntropyInferTest, OutputsKeepTheLeadingDims) {
  for (const Shape& shape : {Shape({2, 3, 5}), Shape({4, 5}), Shape({5}), Shape({2, 0, 3})}) {
    TensorMap env;
    env.emplace("p", RandomTensor(TensorDesc(shape, DT_FLOAT), 1));
    env.emplace(
        "l", RandomTensor(TensorDesc(Leading(shape), DT_INT64), 2, 0, shape.dim(shape.rank() - 1)));
    TensorMap out = MustRun(Xent(), &env);
    EXPECT_EQ(out.at("xent/prob_0").shape(), shape);
    EXPECT_EQ(out.at("xent/out_0").shape(), Leading(shape));
    EXPECT_EQ(out.at("xent/out_0").dtype(), DT_FLOAT);
  }
}

TEST(CrossEntropyInferTest, MismatchedShapesAndTypesNameTheOp) {
  struct Case {
    Shape prediction, label;
    DataType label_type;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {Shape({2, 3, 5}),
       Shape({3, 2}),
       DT_INT32,
       {"'xent' (sparse_softmax_cross_entropy)", "leading dims", "(2, 3, 5)", "(3, 2)"}},
      {Shape({2, 3, 5}), Shape({6}), DT_INT32, {"'xent'", "(2, 3, 5)", "(6,)"}},
      {Shape({2, 3, 5}), Shape({2, 3, 1}), DT_INT32, {"'xent'", "(2, 3, 1)"}},
      {Shape({2, 3}), Shape({2}), DT_FLOAT, {"'xent'", "int32 or int64"}},
      {Shape({2, 0}), Shape({2}), DT_INT32, {"'xent'", "no classes"}},
      {Shape({}), Shape({}), DT_INT32, {"'xent'", "rank >= 1"}},
  };
  for (const Case& c : cases) {
    TensorMap env;
    env.emplace("p", RandomTensor(TensorDesc(c.prediction, DT_FLOAT), 1));
    env.emplace("l", HostTensor(TensorDesc(c.label, c.label_type)));
    const std::string error = RunError(Xent(), &env);
    for (const std::string& part : c.expected) {
      EXPECT_NE(error.find(part), std::string::npos) << part << " not in: " << error;
    }
  }
  // The grad op checks dy against prob's leading dims.
  TensorMap env;
  env.emplace("dy", RandomTensor(TensorDesc(Shape({3, 2}), DT_FLOAT), 1));
  env.emplace("prob", RandomTensor(TensorDesc(Shape({2, 3, 5}), DT_FLOAT), 2));
  env.emplace("l", HostTensor(TensorDesc(Shape({2, 3}), DT_INT32)));
  const std::string error = RunError(XentGrad(false), &env);
  EXPECT_NE(error.find("'xg' (sparse_softmax_cross_entropy_grad)"), std::string::npos) << error;
  EXPECT_NE(error.find("(3, 2)"), std::string::npos) << error;
}

// Shapes with 0, 1 and odd sizes; class counts below, at and above the
// 16-lane blocks of the float32 rows.
const std::vector<Shape>& ValueShapes() {
  static const std::vector<Shape> shapes = {
      Shape({0, 5}),    Shape({2, 0, 5}),  Shape({1, 1}),  Shape({1, 1, 1}),  Shape({7}),
      Shape({3, 5, 7}), Shape({2, 3, 16}), Shape({3, 17}), Shape({2, 2, 65}), Shape({3, 256})};
  return shapes;
}

TEST(CrossEntropyKernelTest, MatchesTheNaiveReference) {
  for (DataType dtype : FloatTypes()) {
    for (DataType label_type : {DT_INT32, DT_INT64}) {
      uint64_t seed = 20;
      for (const Shape& shape : ValueShapes()) {
        const int64_t classes = shape.dim(shape.rank() - 1);
        TensorMap env;
        env.emplace("p", RandomTensor(TensorDesc(shape, dtype), ++seed, -6, 6));
        env.emplace("l", RandomTensor(TensorDesc(Leading(shape), label_type), ++seed, 0, classes));
        TensorMap out = MustRun(Xent(), &env);
        const Reference want = NaiveXent(ToDoubles(env.at("p")), ToDoubles(env.at("l")), classes);
        const std::string what = std::string(DataTypeName(dtype)) + " " + shape.ToString();
        ExpectAllNear(out.at("xent/prob_0"), want.prob, Tolerance(dtype), "prob " + what);
        ExpectAllNear(out.at("xent/out_0"), want.loss, Tolerance(dtype), "out " + what);
      }
    }
  }
}

TEST(CrossEntropyKernelTest, ExtremeLogitsStayFinite) {
  TensorMap env;
  env.emplace("p", HostTensor::FromVector<float>(Shape({2, 3}),
                                                 {1000.f, 0.f, -1000.f, -200.f, -100.f, -300.f}));
  env.emplace("l", HostTensor::FromVector<int32_t>(Shape({2}), {1, 2}));
  TensorMap out = MustRun(Xent(), &env);
  ExpectAllNear(out.at("xent/out_0"), {1000.0, 200.0}, 1e-6);
  ExpectAllNear(out.at("xent/prob_0"), {1, 0, 0, 0, 1, 0}, 1e-6);
}

// A GPT-sized batch (B T = 3072 rows, V = 65) runs split over threads; the
// split does not change a bit, and the values match the reference.
TEST(CrossEntropyKernelTest, ThreadedRowsEqualOneThread) {
  const Shape shape({48, 64, 65});
  TensorMap env;
  env.emplace("p", RandomTensor(TensorDesc(shape, DT_FLOAT), 3, -8, 8));
  env.emplace("l", RandomTensor(TensorDesc(Leading(shape), DT_INT32), 4, 0, 65));
  env.emplace("dy", RandomTensor(TensorDesc(Leading(shape), DT_FLOAT), 5));
  env.emplace("dprob", RandomTensor(TensorDesc(shape, DT_FLOAT), 6));
  const int before = CpuComputeThreadsSetting();
  std::vector<TensorMap> forward, backward;
  for (int threads : {1, 2}) {
    SetCpuComputeThreads(threads);
    forward.push_back(MustRun(Xent(), &env));
    env["prob"] = forward.back().at("xent/prob_0").Clone();
    backward.push_back(MustRun(XentGrad(true), &env));
  }
  SetCpuComputeThreads(before > 0 ? before : 1);
  EXPECT_EQ(ToDoubles(forward[0].at("xent/prob_0")), ToDoubles(forward[1].at("xent/prob_0")));
  EXPECT_EQ(ToDoubles(forward[0].at("xent/out_0")), ToDoubles(forward[1].at("xent/out_0")));
  EXPECT_EQ(ToDoubles(backward[0].at("xg/dx_0")), ToDoubles(backward[1].at("xg/dx_0")));
  const Reference want = NaiveXent(ToDoubles(env.at("p")), ToDoubles(env.at("l")), 65);
  ExpectAllNear(forward[1].at("xent/prob_0"), want.prob, Tolerance(DT_FLOAT), "prob");
  ExpectAllNear(forward[1].at("xent/out_0"), want.loss, Tolerance(DT_FLOAT), "out");
}

TEST(CrossEntropyKernelTest, GradOpMatchesTheFormulaWithAndWithoutDprob) {
  for (DataType dtype : FloatTypes()) {
    for (bool with_dprob : {false, true}) {
      for (const Shape& shape : {Shape({0, 3}), Shape({1, 1}), Shape({3, 5, 7}), Shape({2, 33})}) {
        const int64_t classes = shape.dim(shape.rank() - 1);
        TensorMap env;
        env.emplace("dy", RandomTensor(TensorDesc(Leading(shape), dtype), 7));
        env.emplace("prob", RandomTensor(TensorDesc(shape, dtype), 8, 0, 1));
        env.emplace("dprob", RandomTensor(TensorDesc(shape, dtype), 9));
        env.emplace("l", RandomTensor(TensorDesc(Leading(shape), DT_INT64), 10, 0, classes));
        const std::vector<double> dprob = ToDoubles(env.at("dprob"));
        const std::vector<double> want =
            NaiveXentGrad(ToDoubles(env.at("dy")), ToDoubles(env.at("prob")),
                          ToDoubles(env.at("l")), with_dprob ? &dprob : nullptr, classes);
        ExpectAllNear(MustRun(XentGrad(with_dprob), &env).at("xg/dx_0"), want, Tolerance(dtype),
                      shape.ToString());
      }
    }
  }
}

TEST(CrossEntropyKernelTest, BadLabelNamesOpLabelPositionAndIndex) {
  TensorMap env;
  env.emplace("p", RandomTensor(TensorDesc(Shape({3, 4}), DT_FLOAT), 1));
  env.emplace("l", HostTensor::FromVector<int64_t>(Shape({3}), {0, 3, 4}));
  std::string error = RunError(Xent(), &env);
  EXPECT_NE(error.find("op 'xent' (sparse_softmax_cross_entropy) at iteration 0: label 4 at "
                       "position 2 is out of range [0, 4)"),
            std::string::npos)
      << error;

  env["p"] = RandomTensor(TensorDesc(Shape({2, 3, 4}), DT_DOUBLE), 1);
  env["l"] = HostTensor::FromVector<int32_t>(Shape({2, 3}), {0, 1, 2, 3, -1, 9});
  error = RunError(Xent(), &env);
  EXPECT_NE(error.find("label -1 at position 4 (index [1, 1]) is out of range [0, 4)"),
            std::string::npos)
      << error;

  env.emplace("dy", RandomTensor(TensorDesc(Shape({2, 3}), DT_DOUBLE), 2));
  env.emplace("prob", RandomTensor(TensorDesc(Shape({2, 3, 4}), DT_DOUBLE), 3));
  error = RunError(XentGrad(false), &env);
  EXPECT_NE(error.find("op 'xg' (sparse_softmax_cross_entropy_grad) at iteration 0: label -1 at "
                       "position 4 (index [1, 1])"),
            std::string::npos)
      << error;
}

TEST(CrossEntropyGradTest, FiniteDifferencesOfLossAndProb) {
  uint64_t seed = 30;
  for (DataType label_type : {DT_INT32, DT_INT64}) {
    for (const Shape& shape :
         {Shape({0, 3}), Shape({1, 1}), Shape({7}), Shape({3, 5, 7}), Shape({2, 1, 3, 5})}) {
      TensorMap env;
      env.emplace("p", RandomTensor(TensorDesc(shape, DT_DOUBLE), ++seed, -2, 2));
      env.emplace("l", RandomTensor(TensorDesc(Leading(shape), label_type), ++seed, 0,
                                    shape.dim(shape.rank() - 1)));
      GradCheckOptions options;
      options.skip_inputs = {"label"};
      Status status = CheckOpGradient(Xent(), env, options);
      EXPECT_TRUE(status.ok()) << status << shape;
    }
  }
}

TEST(CrossEntropySbpTest, EveryLeadingAxisSplitAgreesWithOneDevice) {
  for (const Shape& shape : {Shape({6, 5, 4}), Shape({7, 3}), Shape({5})}) {
    const int64_t classes = shape.dim(shape.rank() - 1);
    TensorMap env;
    env.emplace("p", RandomTensor(TensorDesc(shape, DT_DOUBLE), 1, -3, 3));
    env.emplace("l", RandomTensor(TensorDesc(Leading(shape), DT_INT64), 2, 0, classes));
    env.emplace("dy", RandomTensor(TensorDesc(Leading(shape), DT_DOUBLE), 3));
    env.emplace("prob", RandomTensor(TensorDesc(shape, DT_DOUBLE), 4, 0, 1));
    env.emplace("dprob", RandomTensor(TensorDesc(shape, DT_DOUBLE), 5));
    const size_t leading_axes = shape.rank() - 1;
    for (const OpConf& op : {Xent(), XentGrad(false), XentGrad(true)}) {
      for (int64_t devices : {2, 3}) {
        auto result = CheckSbpSignatures(op, env, devices);
        ASSERT_TRUE(result.ok()) << result.status();
        EXPECT_EQ(result->signatures.size(), leading_axes) << op.op_type() << shape;
      }
    }
  }
}

}  // namespace
}  // namespace nn
}  // namespace oflite
