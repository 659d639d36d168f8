// causal_softmax and causal_softmax_grad: values against an unfused
// reference (mask with where, then softmax), the mask itself (changing a
// hidden or later position changes no earlier query's row), finite-difference
// gradients at sizes 0, 1 and odd with Tq < Tk, every offered SBP signature
// on 2 and 3 devices, and the same mask built from iota + greater_equal +
// where + softmax.
#include <cmath>
#include <limits>

#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

// Query i of Tq sees key j of Tk when j <= i + (Tk - Tq).
bool Visible(int64_t i, int64_t j, int64_t queries, int64_t keys) {
  return j <= i + (keys - queries);
}

// Unfused reference in double: z = where(mask, scale * x, -inf), softmax over
// the last axis, and 0 for rows that see nothing.
std::vector<double> Reference(const std::vector<double>& x, const Shape& shape, double scale) {
  const int64_t keys = shape.dim(shape.rank() - 1), queries = shape.dim(shape.rank() - 2);
  std::vector<double> y(x.size(), 0.0);
  const int64_t rows = keys == 0 ? 0 : static_cast<int64_t>(x.size()) / keys;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t q = r % queries;
    std::vector<double> z(keys, -std::numeric_limits<double>::infinity());
    double max_value = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < keys; ++j) {
      if (Visible(q, j, queries, keys)) z[j] = scale * x[r * keys + j];
      max_value = std::max(max_value, z[j]);
    }
    if (std::isinf(max_value)) continue;  // nothing visible
    double sum = 0;
    for (int64_t j = 0; j < keys; ++j) sum += std::exp(z[j] - max_value);
    for (int64_t j = 0; j < keys; ++j) y[r * keys + j] = std::exp(z[j] - max_value) / sum;
  }
  return y;
}

OpConf CausalOp(double scale) {
  return OpConfBuilder("causal_softmax", "cs")
      .Input("x", "in/x_0")
      .Output("y")
      .Attr("scale", scale)
      .Build();
}

OpConf CausalGradOp(double scale) {
  return OpConfBuilder("causal_softmax_grad", "csg")
      .Input("dy", "in/dy_0")
      .Input("y", "in/y_0")
      .Output("dx")
      .Attr("scale", scale)
      .Build();
}

const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {Shape({3, 5, 5}), Shape({2, 1, 7}),    Shape({0, 4, 4}),
                                            Shape({1, 1}),    Shape({2, 3, 4, 6}), Shape({4, 6}),
                                            Shape({5, 3}),    Shape({2, 37, 37})};
  return shapes;
}

TEST(CausalSoftmaxKernelTest, MatchesUnfusedReferenceAndMaskedOutputsAreExactlyZero) {
  for (DataType dtype : FloatTypes()) {
    for (const Shape& shape : Shapes()) {
      for (double scale : {1.0, 0.35, -2.0}) {
        TensorMap env;
        env.emplace("in/x_0", RandomTensor(TensorDesc(shape, dtype), 3, -4, 4));
        const std::vector<double> x = ToDoubles(env.at("in/x_0"));
        TensorMap out = MustRun(CausalOp(scale), &env);
        const std::vector<double> want = Reference(x, shape, scale);
        const std::string what = std::string(DataTypeName(dtype)) + " " + shape.ToString();
        ExpectAllNear(out.at("cs/y_0"), want, Tolerance(dtype), what);
        const std::vector<double> got = ToDoubles(out.at("cs/y_0"));
        for (size_t i = 0; i < got.size(); ++i) {
          if (want[i] == 0) {
            EXPECT_EQ(got[i], 0.0) << what << " element " << i;
          }
        }
      }
    }
  }
}

// Changing x where a query may not look (a masked position, or a later key)
// must leave the rows of every query that cannot see it unchanged, bit for
// bit; a row that sees it (and some other key) must change.
TEST(CausalSoftmaxKernelTest, NoQueryReadsTheFuture) {
  for (DataType dtype : FloatTypes()) {
    for (const Shape& shape : {Shape({2, 5, 5}), Shape({3, 7}), Shape({1, 4, 9})}) {
      const int64_t keys = shape.dim(shape.rank() - 1), queries = shape.dim(shape.rank() - 2);
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(shape, dtype), 5, -2, 2));
      const std::vector<double> before = ToDoubles(MustRun(CausalOp(0.5), &env).at("cs/y_0"));
      for (int64_t key = 0; key < keys; ++key) {
        // Perturb column `key` of every query of the first matrix.
        TensorMap changed;
        changed.emplace("in/x_0", env.at("in/x_0").Clone());
        HostTensor& x = changed.at("in/x_0");
        for (int64_t q = 0; q < queries; ++q) {
          const int64_t k = q * keys + key;
          if (dtype == DT_FLOAT) x.data<float>()[k] += 100.0f;
          if (dtype == DT_DOUBLE) x.data<double>()[k] += 100.0;
        }
        const std::vector<double> after = ToDoubles(MustRun(CausalOp(0.5), &changed).at("cs/y_0"));
        for (int64_t q = 0; q < queries; ++q) {
          // A query that sees one key only has y = 1 there whatever x is.
          const bool sees = Visible(q, key, queries, keys) && Visible(q, 1, queries, keys);
          bool row_same = true;
          for (int64_t j = 0; j < keys; ++j)
            row_same &= after[q * keys + j] == before[q * keys + j];
          EXPECT_EQ(row_same, !sees) << shape << " key " << key << " query " << q;
        }
      }
    }
  }
}

TEST(CausalSoftmaxKernelTest, GradOpMatchesFormula) {
  for (DataType dtype : FloatTypes()) {
    for (const Shape& shape : Shapes()) {
      const double scale = 0.7;
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(shape, dtype), 8, -3, 3));
      env.emplace("in/dy_0", RandomTensor(TensorDesc(shape, dtype), 9, -1, 1));
      env.emplace("in/y_0", std::move(MustRun(CausalOp(scale), &env).at("cs/y_0")));
      const std::vector<double> y = ToDoubles(env.at("in/y_0")), dy = ToDoubles(env.at("in/dy_0"));
      const int64_t keys = shape.dim(shape.rank() - 1);
      std::vector<double> want(y.size(), 0.0);
      for (size_t r = 0; keys > 0 && r < y.size() / keys; ++r) {
        double dot = 0;
        for (int64_t j = 0; j < keys; ++j) dot += dy[r * keys + j] * y[r * keys + j];
        for (int64_t j = 0; j < keys; ++j) {
          const size_t k = r * keys + j;
          // Masked positions have y == 0 and so dx == 0 exactly.
          want[k] = scale * y[k] * (dy[k] - dot);
        }
      }
      ExpectAllNear(MustRun(CausalGradOp(scale), &env).at("csg/dx_0"), want, Tolerance(dtype),
                    shape.ToString());
    }
  }
}

TEST(CausalSoftmaxKernelTest, GradientsMatchFiniteDifferences) {
  for (const Shape& shape : Shapes()) {
    for (double scale : {1.0, 0.4}) {
      TensorMap env;
      env.emplace("in/x_0", RandomTensor(TensorDesc(shape, DT_DOUBLE), 4, -2, 2));
      Status status = CheckOpGradient(CausalOp(scale), env);
      EXPECT_TRUE(status.ok()) << shape << " scale " << scale << ": " << status;
    }
  }
}

TEST(CausalSoftmaxKernelTest, EveryOfferedSignatureAgreesWithOneDevice) {
  for (const Shape& shape : {Shape({6, 5, 5}), Shape({3, 6, 4, 7}), Shape({5, 5})}) {
    TensorMap env;
    env.emplace("in/x_0", RandomTensor(TensorDesc(shape, DT_DOUBLE), 12, -2, 2));
    env.emplace("in/dy_0", RandomTensor(TensorDesc(shape, DT_DOUBLE), 13, -1, 1));
    env.emplace("in/y_0", std::move(MustRun(CausalOp(0.5), &env).at("cs/y_0")));
    for (const OpConf& op : {CausalOp(0.5), CausalGradOp(0.5)}) {
      for (int64_t devices : {2, 3}) {
        auto result = CheckSbpSignatures(op, env, devices);
        ASSERT_TRUE(result.ok()) << result.status();
        // One split per batch axis; never the query or key axis.
        EXPECT_EQ(result->signatures.size(), static_cast<size_t>(shape.rank() - 2))
            << op.op_type() << " " << shape;
      }
    }
  }
}

TEST(CausalSoftmaxKernelTest, ShapeErrorsNameTheOp) {
  TensorMap env;
  env.emplace("in/x_0", RandomTensor(TensorDesc(Shape({4}), DT_FLOAT), 1));
  std::string error = RunError(CausalOp(1.0), &env);
  EXPECT_NE(error.find("'cs'"), std::string::npos) << error;
  EXPECT_NE(error.find("rank >= 2"), std::string::npos) << error;
  env.emplace("in/dy_0", HostTensor(TensorDesc(Shape({2, 3}), DT_FLOAT)));
  env.emplace("in/y_0", HostTensor(TensorDesc(Shape({2, 4}), DT_FLOAT)));
  error = RunError(CausalGradOp(1.0), &env);
  EXPECT_NE(error.find("'csg'"), std::string::npos) << error;
  EXPECT_NE(error.find("(2, 3)"), std::string::npos) << error;
}

// The same mask from the general ops: keep = iota(-2) >= iota(-1) - (Tk -
// Tq), z = where(keep, scale * x, -1e30), y = softmax(z).
TEST(CausalSoftmaxKernelTest, EqualsAMaskBuiltFromIotaGreaterEqualWhereAndSoftmax) {
  const double scale = 0.25;
  for (const Shape& shape : {Shape({2, 5, 5}), Shape({3, 4, 9}), Shape({1, 1, 1})}) {
    const double offset = static_cast<double>(shape.dim(2) - shape.dim(1));
    TensorMap env;
    env.emplace("in/x_0", RandomTensor(TensorDesc(shape, DT_DOUBLE), 21, -3, 3));
    HostTensor hidden(TensorDesc(Shape({1}), DT_DOUBLE));
    hidden.data<double>()[0] = -1e30;
    env.emplace("in/hidden_0", std::move(hidden));
    auto run = [&](const OpConf& op) {
      const std::string lbn = op.output(0).lbn(0);
      HostTensor t = std::move(MustRun(op, &env).at(lbn));
      env.emplace(lbn, std::move(t));
    };
    auto iota = [](const std::string& name, int64_t axis) {
      return OpConfBuilder("iota", name)
          .Input("like", "in/x_0")
          .Output("out")
          .Attr("axis", axis)
          .Attr("dtype", DT_DOUBLE)
          .Build();
    };
    run(iota("row", -2));
    run(iota("col", -1));
    run(OpConfBuilder("scalar_add", "col_back")
            .Input("in", "col/out_0")
            .Output("out")
            .Attr("value", -offset)
            .Build());
    run(OpConfBuilder("greater_equal", "keep")
            .Input("x", "row/out_0")
            .Input("y", "col_back/out_0")
            .Output("out")
            .Build());
    run(OpConfBuilder("scalar_mul", "scaled")
            .Input("in", "in/x_0")
            .Output("out")
            .Attr("value", scale)
            .Build());
    run(OpConfBuilder("where", "masked")
            .Input("condition", "keep/out_0")
            .Input("x", "scaled/out_0")
            .Input("y", "in/hidden_0")
            .Output("out")
            .Build());
    run(OpConfBuilder("softmax", "sm").Input("x", "masked/out_0").Output("y").Build());
    const std::vector<double> want = ToDoubles(env.at("sm/y_0"));
    ExpectAllNear(MustRun(CausalOp(scale), &env).at("cs/y_0"), want, 1e-12, shape.ToString());
  }
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
