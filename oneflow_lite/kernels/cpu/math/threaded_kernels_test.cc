// The math kernels that split their work over threads
// (kernels/cpu/parallel_rows.h): bias_add (rows and NCHW planes),
// reduce_sum over leading axes and over others (split by output: an NCHW
// bias gradient, a last axis, a middle axis, columns), reduce_mean,
// broadcast_like, relu, relu_grad, sigmoid (and its grad), add of 2 and 3
// inputs, broadcast_add, transpose (block copies and tiles) and reshape give
// the same bits on 1, 2 and 3 threads at GPT and CNN sizes and at odd ones,
// and the right values. Every case is large enough for 3 threads
// (kMinWorkPerThread each).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"

namespace oflite {
namespace math {
namespace {

// One op over random inputs, and its expected output from those inputs'
// values (in the order of `inputs`).
struct Case {
  std::string what;
  OpConf op;
  std::vector<std::pair<std::string, Shape>> inputs;
  std::string output;
  std::function<std::vector<double>(const std::vector<std::vector<double>>&)> reference;
};

// The transposed values of x (shape `in`) under `perm`.
std::vector<double> Transposed(const std::vector<double>& x, const Shape& in,
                               const std::vector<int64_t>& perm) {
  std::vector<int64_t> out_dims;
  for (int64_t axis : perm) out_dims.push_back(in.dim(axis));
  const Shape out(out_dims);
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < out.elem_count(); ++i) {
    const std::vector<int64_t> out_index = Unravel(i, out);
    std::vector<int64_t> in_index(perm.size());
    for (size_t j = 0; j < perm.size(); ++j) in_index[perm[j]] = out_index[j];
    y[i] = x[Ravel(in_index, in)];
  }
  return y;
}

Case TransposeCase(const Shape& shape, const std::vector<int64_t>& perm) {
  return {"transpose " + shape.ToString() + " perm " + Shape(perm).ToString(),
          OpConfBuilder("transpose", "op").Input("x", "in0").Output("y").Attr("perm", perm).Build(),
          {{"in0", shape}},
          "op/y_0",
          [shape, perm](const std::vector<std::vector<double>>& in) {
            return Transposed(in[0], shape, perm);
          }};
}

// bias_add of b [channels] along `axis` of a.
Case BiasAddCase(const Shape& shape, int64_t axis) {
  const int64_t channels = shape.dim(axis), inner = shape.Count(axis + 1);
  return {"bias_add " + shape.ToString() + " axis " + std::to_string(axis),
          OpConfBuilder("bias_add", "op")
              .Input("a", "in0")
              .Input("b", "in1")
              .Output("out")
              .Attr("axis", axis)
              .Build(),
          {{"in0", shape}, {"in1", Shape({channels})}},
          "op/out_0",
          [channels, inner](const std::vector<std::vector<double>>& in) {
            std::vector<double> y(in[0].size());
            for (size_t i = 0; i < y.size(); ++i) y[i] = in[0][i] + in[1][(i / inner) % channels];
            return y;
          }};
}

// reduce_sum of x [rows, cols] over its leading axes `axes` (0 .. k - 1).
Case ReduceSumCase(const Shape& shape, std::vector<int64_t> axes) {
  const int64_t cols = shape.Count(axes.size());
  return {
      "reduce_sum " + shape.ToString() + " axes " + Shape(axes).ToString(),
      OpConfBuilder("reduce_sum", "op").Input("x", "in0").Output("y").Attr("axis", axes).Build(),
      {{"in0", shape}},
      "op/y_0",
      [cols](const std::vector<std::vector<double>>& in) {
        std::vector<double> y(cols, 0.0);
        for (size_t i = 0; i < in[0].size(); ++i) y[i % cols] += in[0][i];
        return y;
      }};
}

// reduce_sum (or reduce_mean) of x over any `axes` (sorted).
Case ReduceCase(const Shape& shape, std::vector<int64_t> axes, bool mean = false) {
  const char* type = mean ? "reduce_mean" : "reduce_sum";
  std::vector<int64_t> kept_dims = shape.dims();
  int64_t count = 1;
  for (int64_t axis : axes) {
    count *= shape.dim(axis);
    kept_dims[axis] = 1;
  }
  const Shape kept(kept_dims);
  return {std::string(type) + " " + shape.ToString() + " axes " + Shape(axes).ToString(),
          OpConfBuilder(type, "op").Input("x", "in0").Output("y").Attr("axis", axes).Build(),
          {{"in0", shape}},
          "op/y_0",
          [shape, axes, kept, count, mean](const std::vector<std::vector<double>>& in) {
            std::vector<double> y(kept.elem_count(), 0.0);
            for (size_t i = 0; i < in[0].size(); ++i) {
              std::vector<int64_t> index = Unravel(static_cast<int64_t>(i), shape);
              for (int64_t axis : axes) index[axis] = 0;
              y[Ravel(index, kept)] += in[0][i];
            }
            if (mean) {
              for (double& v : y) v /= static_cast<double>(count);
            }
            return y;
          }};
}

// broadcast_like of x (`like` without the listed axes) to `like`.
Case BroadcastLikeCase(const Shape& like, std::vector<int64_t> axes) {
  std::vector<int64_t> x_dims;
  for (int64_t i = 0; i < like.rank(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) x_dims.push_back(like.dim(i));
  }
  const Shape x(x_dims);
  return {"broadcast_like " + x.ToString() + " to " + like.ToString(),
          OpConfBuilder("broadcast_like", "op")
              .Input("x", "in0")
              .Input("like", "in1")
              .Output("y")
              .Attr("axis", axes)
              .Build(),
          {{"in0", x}, {"in1", like}},
          "op/y_0",
          [like, axes, x](const std::vector<std::vector<double>>& in) {
            std::vector<double> y(like.elem_count());
            for (int64_t i = 0; i < like.elem_count(); ++i) {
              const std::vector<int64_t> index = Unravel(i, like);
              std::vector<int64_t> x_index;
              for (int64_t d = 0; d < like.rank(); ++d) {
                if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
                  x_index.push_back(index[d]);
                }
              }
              y[i] = in[0][Ravel(x_index, x)];
            }
            return y;
          }};
}

// An activation y = f(x).
Case ActivationCase(const std::string& type, const Shape& shape, double (*f)(double)) {
  return {type + " " + shape.ToString(),
          OpConfBuilder(type, "op").Input("x", "in0").Output("y").Build(),
          {{"in0", shape}},
          "op/y_0",
          [f](const std::vector<std::vector<double>>& in) {
            std::vector<double> y(in[0].size());
            for (size_t i = 0; i < y.size(); ++i) y[i] = f(in[0][i]);
            return y;
          }};
}

// An activation's gradient dx = g(dy, y) (y: the forward output, random
// here).
Case GradCase(const std::string& type, const Shape& shape, double (*g)(double, double)) {
  return {type + " " + shape.ToString(),
          OpConfBuilder(type, "op").Input("dy", "in0").Input("y", "in1").Output("dx").Build(),
          {{"in0", shape}, {"in1", shape}},
          "op/dx_0",
          [g](const std::vector<std::vector<double>>& in) {
            std::vector<double> dx(in[0].size());
            for (size_t i = 0; i < dx.size(); ++i) dx[i] = g(in[0][i], in[1][i]);
            return dx;
          }};
}

double Relu(double x) { return x > 0 ? x : 0; }
double ReluGrad(double dy, double y) { return y > 0 ? dy : 0; }
double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double SigmoidGrad(double dy, double y) { return dy * y * (1 - y); }

Case AddCase(const Shape& shape, int count) {
  std::vector<std::string> lbns;
  std::vector<std::pair<std::string, Shape>> inputs;
  for (int k = 0; k < count; ++k) {
    lbns.push_back("in" + std::to_string(k));
    inputs.emplace_back(lbns.back(), shape);
  }
  return {"add of " + std::to_string(count) + " " + shape.ToString(),
          OpConfBuilder("add", "op").Input("in", lbns).Output("out").Build(), inputs, "op/out_0",
          [](const std::vector<std::vector<double>>& in) {
            std::vector<double> y(in[0].size(), 0.0);
            for (const auto& values : in) {
              for (size_t i = 0; i < y.size(); ++i) y[i] += values[i];
            }
            return y;
          }};
}

// broadcast_add of x `shape` and y, the trailing `tail` axes of it.
Case BroadcastAddCase(const Shape& shape, int64_t tail) {
  const Shape small(std::vector<int64_t>(shape.dims().end() - tail, shape.dims().end()));
  const int64_t n = small.elem_count();
  return {"broadcast_add " + shape.ToString() + " + " + small.ToString(),
          OpConfBuilder("broadcast_add", "op")
              .Input("x", "in0")
              .Input("y", "in1")
              .Output("out")
              .Build(),
          {{"in0", shape}, {"in1", small}},
          "op/out_0",
          [n](const std::vector<std::vector<double>>& in) {
            std::vector<double> y(in[0].size());
            for (size_t i = 0; i < y.size(); ++i) y[i] = in[0][i] + in[1][i % n];
            return y;
          }};
}

Case ReshapeCase(const Shape& shape) {
  return {"reshape " + shape.ToString(),
          OpConfBuilder("reshape", "op")
              .Input("x", "in0")
              .Output("y")
              .Attr("shape", Shape({shape.elem_count()}))
              .Build(),
          {{"in0", shape}},
          "op/y_0",
          [](const std::vector<std::vector<double>>& in) { return in[0]; }};
}

std::vector<Case> Cases() {
  return {
      // GPT sizes: heads split and merged, MLP and attention biases and their
      // gradients, residual gradient sums, embeddings plus positions.
      TransposeCase(Shape({12, 64, 4, 32}), {0, 2, 1, 3}),
      TransposeCase(Shape({12, 4, 64, 32}), {0, 2, 1, 3}),
      BiasAddCase(Shape({768, 512}), 1),
      ReduceSumCase(Shape({768, 512}), {0}),
      ReduceSumCase(Shape({12, 64, 128}), {0, 1}),
      AddCase(Shape({768, 128}), 2),
      AddCase(Shape({768, 128}), 3),
      BroadcastAddCase(Shape({12, 64, 128}), 2),
      ReshapeCase(Shape({12, 64, 4, 32})),
      // Odd sizes: partial blocks everywhere, strided and tiled transposes.
      TransposeCase(Shape({7, 61, 5, 33}), {0, 2, 1, 3}),
      TransposeCase(Shape({9, 67, 129}), {0, 2, 1}),
      TransposeCase(Shape({33, 45, 31}), {2, 1, 0}),
      BiasAddCase(Shape({301, 257}), 1),
      BiasAddCase(Shape({5, 37, 19, 23}), 1),
      ReduceSumCase(Shape({333, 3, 101}), {0, 1}),
      AddCase(Shape({100003}), 2),
      AddCase(Shape({3, 33339}), 4),
      BroadcastAddCase(Shape({41, 33, 29}), 1),
      ReshapeCase(Shape({3, 70001})),
      // CNN sizes (LeNet-5's first convolution at batch 32): activations,
      // their gradients, the bias gradient over batch and space, its mean.
      ActivationCase("relu", Shape({32, 6, 28, 28}), Relu),
      GradCase("relu_grad", Shape({32, 6, 28, 28}), ReluGrad),
      ReduceCase(Shape({32, 6, 28, 28}), {0, 2, 3}),
      ReduceCase(Shape({32, 6, 28, 28}), {0, 2, 3}, /*mean=*/true),
      BroadcastLikeCase(Shape({32, 6, 28, 28}), {0, 2, 3}),
      // Odd sizes: partial 64-element blocks, a transcendental activation,
      // fewer channels than threads would like, a last axis, a middle axis,
      // only the inner run kept (its columns split), one long run broadcast.
      ActivationCase("relu", Shape({3, 70001}), Relu),
      ActivationCase("sigmoid", Shape({7, 4099}), Sigmoid),
      GradCase("relu_grad", Shape({3, 70001}), ReluGrad),
      GradCase("sigmoid_grad", Shape({3, 70001}), SigmoidGrad),
      ReduceCase(Shape({13, 5, 37, 41}), {0, 2, 3}),
      ReduceCase(Shape({301, 513}), {1}),
      ReduceCase(Shape({33, 65, 47}), {1}, /*mean=*/true),
      ReduceCase(Shape({1, 501, 259}), {1}),
      ReduceCase(Shape({3, 5, 7, 997}), {0, 2}),
      BroadcastLikeCase(Shape({301, 513}), {1}),
      BroadcastLikeCase(Shape({1, 100003}), {0}),
  };
}

class ThreadedKernelsTest : public ::testing::TestWithParam<DataType> {};

TEST_P(ThreadedKernelsTest, SameBitsOnAnyThreadCountAndRightValues) {
  const DataType dtype = GetParam();
  const int before = CpuComputeThreadsSetting();
  for (const Case& c : Cases()) {
    TensorMap env;
    std::vector<std::vector<double>> values;
    uint64_t seed = 1;
    for (const auto& [lbn, shape] : c.inputs) {
      env.emplace(lbn, RandomTensor(TensorDesc(shape, dtype), seed++, -3, 3));
      values.push_back(ToDoubles(env.at(lbn)));
    }
    std::vector<HostTensor> outs;
    for (int threads : {1, 2, 3}) {
      SetCpuComputeThreads(threads);
      auto out = RunSingle(c.op, &env, c.output);
      ASSERT_TRUE(out.ok()) << c.what << ": " << out.status();
      outs.push_back(std::move(*out));
    }
    for (size_t run = 1; run < outs.size(); ++run) {
      ASSERT_EQ(outs[run].ByteSize(), outs[0].ByteSize()) << c.what;
      EXPECT_EQ(std::memcmp(outs[run].raw(), outs[0].raw(), outs[0].ByteSize()), 0)
          << c.what << ": run " << run << " differs from one thread";
    }
    // Sums of up to 768 values in float32.
    const double tol = Tolerance(dtype) * (dtype == DT_FLOAT ? 50 : 1);
    EXPECT_EQ(CompareValues(ToDoubles(outs[0]), c.reference(values), tol), "") << c.what;
  }
  SetCpuComputeThreads(before > 0 ? before : 1);
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, ThreadedKernelsTest, ::testing::Values(DT_FLOAT, DT_DOUBLE),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(DataTypeName(info.param));
                         });

}  // namespace
}  // namespace math
}  // namespace oflite
