// iota and the comparison ops: values against direct references for every
// dtype at sizes 0, 1 and odd with broadcasting, NaN rules, the uint8 output
// as where's condition, zero gradients, inference errors naming the op, and
// every offered SBP signature on 2 and 3 devices.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace math {
namespace {

OpConf IotaOp(int64_t axis, DataType dtype) {
  return OpConfBuilder("iota", "i")
      .Input("like", "like")
      .Output("out")
      .Attr("axis", axis)
      .Attr("dtype", dtype)
      .Build();
}

OpConf CompareOp(const std::string& type) {
  return OpConfBuilder(type, "c").Input("x", "x").Input("y", "y").Output("out").Build();
}

TEST(IotaTest, IndexAlongTheAxisForEveryDtypeAndSize) {
  for (const Shape& shape : {Shape({0, 3}), Shape({1}), Shape({3, 5}), Shape({2, 7, 3})}) {
    for (int64_t axis = -shape.rank(); axis < shape.rank(); ++axis) {
      const int64_t normalized = axis < 0 ? axis + shape.rank() : axis;
      for (DataType like_type : {DT_FLOAT, DT_INT64}) {
        for (DataType dtype : {DT_INT32, DT_INT64, DT_FLOAT, DT_DOUBLE}) {
          TensorMap env;
          env.emplace("like", RandomTensor(TensorDesc(shape, like_type), 1, 0, 5));
          auto out = RunSingle(IotaOp(axis, dtype), &env, "i/out_0");
          ASSERT_TRUE(out.ok()) << out.status();
          ASSERT_EQ(out->desc(), TensorDesc(shape, dtype));
          std::vector<double> want(shape.elem_count());
          for (int64_t i = 0; i < shape.elem_count(); ++i) {
            want[i] = static_cast<double>(Unravel(i, shape)[normalized]);
          }
          EXPECT_EQ(CompareValues(ToDoubles(*out), want, 0), "") << shape << " axis " << axis;
        }
      }
    }
  }
}

TEST(IotaTest, DefaultDtypeIsInt32AndBadAttributesNameTheOp) {
  TensorMap env;
  env.emplace("like", RandomTensor(TensorDesc(Shape({2, 3}), DT_FLOAT), 1));
  auto out = RunSingle(OpConfBuilder("iota", "i")
                           .Input("like", "like")
                           .Output("out")
                           .Attr("axis", int64_t{1})
                           .Build(),
                       &env, "i/out_0");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype(), DT_INT32);
  auto bad_axis = RunSingle(IotaOp(2, DT_INT32), &env, "i/out_0");
  EXPECT_NE(bad_axis.status().message().find("op 'i' (iota): axis 2"), std::string::npos)
      << bad_axis.status();
  auto bad_dtype = RunSingle(IotaOp(0, DT_UINT8), &env, "i/out_0");
  EXPECT_NE(bad_dtype.status().message().find("op 'i' (iota)"), std::string::npos)
      << bad_dtype.status();
  auto no_axis = RunSingle(OpConfBuilder("iota", "i").Input("like", "like").Output("out").Build(),
                           &env, "i/out_0");
  EXPECT_NE(no_axis.status().message().find("'axis'"), std::string::npos) << no_axis.status();
}

struct CompareCase {
  std::string type;
  std::function<bool(double, double)> f;
};

std::vector<CompareCase> CompareCases() {
  return {{"equal", [](double a, double b) { return a == b; }},
          {"not_equal", [](double a, double b) { return a != b; }},
          {"less", [](double a, double b) { return a < b; }},
          {"less_equal", [](double a, double b) { return a <= b; }},
          {"greater", [](double a, double b) { return a > b; }},
          {"greater_equal", [](double a, double b) { return a >= b; }}};
}

// Element of `in` read at output index `index` (numpy broadcasting).
int64_t Source(const std::vector<int64_t>& index, const Shape& in) {
  const int64_t lead = static_cast<int64_t>(index.size()) - in.rank();
  std::vector<int64_t> at(in.rank());
  for (int64_t i = 0; i < in.rank(); ++i) at[i] = in.dim(i) == 1 ? 0 : index[i + lead];
  return Ravel(at, in);
}

TEST(CompareTest, MatchesReferenceWithBroadcastingForEveryDtype) {
  struct Shapes {
    Shape x, y, out;
  };
  const std::vector<Shapes> cases = {{Shape({0}), Shape({1}), Shape({0})},
                                     {Shape({1}), Shape({1}), Shape({1})},
                                     {Shape({3, 5}), Shape({5}), Shape({3, 5})},
                                     {Shape({7, 1, 3}), Shape({5, 1}), Shape({7, 5, 3})}};
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
    for (const Shapes& c : cases) {
      TensorMap env;
      // Small integers so that ties happen.
      env.emplace("x", RandomTensor(TensorDesc(c.x, dtype), 3, 0, 3));
      env.emplace("y", RandomTensor(TensorDesc(c.y, dtype), 4, 0, 3));
      if (dtype == DT_FLOAT || dtype == DT_DOUBLE) {
        for (const char* lbn : {"x", "y"}) {
          HostTensor& t = env.at(lbn);
          for (int64_t i = 0; i < t.elem_count(); ++i) {
            if (dtype == DT_FLOAT) t.data<float>()[i] = std::floor(t.data<float>()[i]);
            if (dtype == DT_DOUBLE) t.data<double>()[i] = std::floor(t.data<double>()[i]);
          }
        }
      }
      const std::vector<double> x = ToDoubles(env.at("x")), y = ToDoubles(env.at("y"));
      for (const CompareCase& cc : CompareCases()) {
        auto out = RunSingle(CompareOp(cc.type), &env, "c/out_0");
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ(out->desc(), TensorDesc(c.out, DT_UINT8));
        std::vector<double> want(c.out.elem_count());
        for (int64_t i = 0; i < c.out.elem_count(); ++i) {
          const std::vector<int64_t> index = Unravel(i, c.out);
          want[i] = cc.f(x[Source(index, c.x)], y[Source(index, c.y)]) ? 1 : 0;
        }
        EXPECT_EQ(CompareValues(ToDoubles(*out), want, 0), "")
            << cc.type << " " << DataTypeName(dtype) << c.x << c.y;
      }
    }
  }
}

TEST(CompareTest, NanComparesFalseExceptNotEqual) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TensorMap env;
  HostTensor x(TensorDesc(Shape({2}), DT_DOUBLE)), y(TensorDesc(Shape({2}), DT_DOUBLE));
  x.data<double>()[0] = nan;
  x.data<double>()[1] = 1.0;
  y.data<double>()[0] = nan;
  y.data<double>()[1] = nan;
  env.emplace("x", std::move(x));
  env.emplace("y", std::move(y));
  for (const CompareCase& cc : CompareCases()) {
    auto out = RunSingle(CompareOp(cc.type), &env, "c/out_0");
    ASSERT_TRUE(out.ok()) << out.status();
    const double want = cc.type == "not_equal" ? 1 : 0;
    EXPECT_EQ(ToDoubles(*out), (std::vector<double>{want, want})) << cc.type;
  }
}

TEST(CompareTest, OutputIsAConditionForWhere) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({4, 3}), DT_DOUBLE), 5));
  env.emplace("y", RandomTensor(TensorDesc(Shape({3}), DT_DOUBLE), 6));
  auto cond = RunSingle(CompareOp("greater"), &env, "c/out_0");
  ASSERT_TRUE(cond.ok()) << cond.status();
  env.emplace("c/out_0", std::move(*cond));
  auto out = RunSingle(OpConfBuilder("where", "w")
                           .Input("condition", "c/out_0")
                           .Input("x", "x")
                           .Input("y", "y")
                           .Output("out")
                           .Build(),
                       &env, "w/out_0");
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<double> x = ToDoubles(env.at("x")), y = ToDoubles(env.at("y"));
  std::vector<double> want(12);
  for (int i = 0; i < 12; ++i) want[i] = std::max(x[i], y[i % 3]);
  EXPECT_EQ(CompareValues(ToDoubles(*out), want, 0), "");
}

TEST(CompareTest, InferenceErrorsNameTheOp) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({2, 3}), DT_FLOAT), 1));
  env.emplace("y", RandomTensor(TensorDesc(Shape({4}), DT_FLOAT), 2));
  auto shapes = RunSingle(CompareOp("less"), &env, "c/out_0");
  EXPECT_NE(shapes.status().message().find("op 'c' (less): shapes do not broadcast"),
            std::string::npos)
      << shapes.status();
  env.erase("y");
  env.emplace("y", RandomTensor(TensorDesc(Shape({3}), DT_DOUBLE), 2));
  auto dtypes = RunSingle(CompareOp("equal"), &env, "c/out_0");
  EXPECT_NE(dtypes.status().message().find("op 'c' (equal): needs x and y of one dtype"),
            std::string::npos)
      << dtypes.status();
}

// The rules give zero gradients (the ops are piecewise constant): a float64
// iota and a comparison feeding where check against finite differences.
TEST(CompareTest, GradientsAreZero) {
  for (const Shape& shape : {Shape({0, 2}), Shape({1, 1}), Shape({3, 5})}) {
    TensorMap env;
    env.emplace("like", RandomTensor(TensorDesc(shape, DT_DOUBLE), 7));
    Status status = CheckOpGradient(IotaOp(1, DT_DOUBLE), env);
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(CompareSbpTest, EveryOfferedSignatureAgreesWithOneDevice) {
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({6, 1, 5}), DT_DOUBLE), 8, 0, 3));
  env.emplace("y", RandomTensor(TensorDesc(Shape({4, 5}), DT_DOUBLE), 9, 0, 3));
  env.emplace("like", RandomTensor(TensorDesc(Shape({6, 4, 5}), DT_DOUBLE), 10));
  for (int64_t n : {2, 3}) {
    for (const CompareCase& cc : CompareCases()) {
      auto result = CheckSbpSignatures(CompareOp(cc.type), env, n);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->signatures.size(), 3u) << cc.type;  // S(0), S(1), S(2) of out
    }
    for (int64_t axis : {0, 1, -1}) {
      auto result = CheckSbpSignatures(IotaOp(axis, DT_INT32), env, n);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->signatures.size(), 2u) << "iota axis " << axis;  // not along axis
    }
  }
}

}  // namespace
}  // namespace math
}  // namespace oflite
