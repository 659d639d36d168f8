#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

TEST(ArgmaxKernelTest, FirstMaximumAlongAxis) {
  for (DataType dtype : FloatTypes()) {
    TensorMap env;
    env.emplace("in/x_0", RandomTensor(TensorDesc(Shape({2, 3, 5}), dtype), 4));
    const std::vector<double> x = ToDoubles(env.at("in/x_0"));
    for (int64_t axis : {0, 1, 2}) {
      OpConf op =
          OpConfBuilder("argmax", "am").Input("x", "in/x_0").Output("y").Attr("axis", axis).Build();
      TensorMap out = MustRun(op, &env);
      const int64_t dims[3] = {2, 3, 5};
      std::vector<double> expected;
      for (int64_t a = 0; a < (axis == 0 ? 1 : 2); ++a)
        for (int64_t b = 0; b < (axis == 1 ? 1 : 3); ++b)
          for (int64_t c = 0; c < (axis == 2 ? 1 : 5); ++c) {
            int64_t best = 0;
            double best_value = -1e300;
            for (int64_t k = 0; k < dims[axis]; ++k) {
              int64_t i[3] = {a, b, c};
              i[axis] = k;
              const double v = x[(i[0] * 3 + i[1]) * 5 + i[2]];
              if (v > best_value) best_value = v, best = k;
            }
            expected.push_back(best);
          }
      EXPECT_EQ(out.at("am/y_0").dtype(), DT_INT32);
      ExpectAllNear(out.at("am/y_0"), expected, 0, "axis " + std::to_string(axis));
    }
  }
  TensorMap ties;
  ties.emplace("in/x_0", HostTensor::FromVector<float>(Shape({1, 4}), {1, 3, 3, 0}));
  OpConf op = OpConfBuilder("argmax", "am").Input("x", "in/x_0").Output("y").Build();
  ExpectAllNear(MustRun(op, &ties).at("am/y_0"), {1}, 0);
}

OpConf AccuracyOp() {
  return OpConfBuilder("accuracy", "acc")
      .Input("prediction", "in/p_0")
      .Input("label", "in/l_0")
      .Output("out")
      .Build();
}

TEST(AccuracyKernelTest, FractionOfCorrectRows) {
  TensorMap env;
  env.emplace("in/p_0", HostTensor::FromVector<double>(Shape({4, 3}), {0.1, 0.8, 0.1,  //
                                                                       0.5, 0.2, 0.3,  //
                                                                       0.2, 0.2, 0.6,  //
                                                                       0.3, 0.4, 0.3}));
  env.emplace("in/l_0", HostTensor::FromVector<int64_t>(Shape({4}), {1, 0, 1, 1}));
  TensorMap out = MustRun(AccuracyOp(), &env);
  EXPECT_EQ(out.at("acc/out_0").shape(), Shape());
  ExpectAllNear(out.at("acc/out_0"), {0.75}, 0);
}

TEST(AccuracyKernelTest, RandomAgainstReferenceAndEmptyBatch) {
  for (DataType dtype : FloatTypes()) {
    for (int64_t rows : {0, 1, 9}) {
      TensorMap env;
      env.emplace("in/p_0", RandomTensor(TensorDesc(Shape({rows, 3}), dtype), 2));
      env.emplace("in/l_0", RandomTensor(TensorDesc(Shape({rows}), DT_INT32), 3, 0, 3));
      const std::vector<double> p = ToDoubles(env.at("in/p_0"));
      const std::vector<double> l = ToDoubles(env.at("in/l_0"));
      int correct = 0;
      for (int64_t n = 0; n < rows; ++n) {
        int best = 0;
        for (int c = 1; c < 3; ++c)
          if (p[n * 3 + c] > p[n * 3 + best]) best = c;
        correct += best == l[n];
      }
      TensorMap out = MustRun(AccuracyOp(), &env);
      ExpectAllNear(out.at("acc/out_0"), {rows ? double(correct) / rows : 0.0}, Tolerance(dtype));
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
