// matmul of rank >= 2 (docs/ops.md): shape inference and its errors, the
// gradient rule against finite differences (float64) and every SBP
// signature against one device, for the 2-D, Linear ([..., m, k] x [k, n]),
// batched, broadcast-batch and sum_batch forms with every transpose.
#include <gtest/gtest.h>

#include <algorithm>

#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/testing/op_runner.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace {

OpConf Matmul(bool ta, bool tb, double alpha = 1.0, bool sum_batch = false) {
  OpConfBuilder builder("matmul", "attn_scores");
  builder.Input("a", "a")
      .Input("b", "b")
      .Output("out")
      .Attr("transpose_a", ta)
      .Attr("transpose_b", tb)
      .Attr("alpha", alpha);
  if (sum_batch) builder.Attr("sum_batch", true);
  return builder.Build();
}

StatusOr<Shape> InferShape(const OpConf& op, const Shape& a, const Shape& b,
                           DataType dtype = DT_FLOAT) {
  ASSIGN_OR_RETURN(ArgDescs outs,
                   InferOp(op, {{"a", {TensorDesc(a, dtype)}}, {"b", {TensorDesc(b, dtype)}}}));
  return outs.at("out").at(0).shape;
}

// Stored shape of an operand whose op() is [rows, cols] per batch entry.
Shape Stored(std::vector<int64_t> batch, int64_t rows, int64_t cols, bool transposed) {
  batch.push_back(transposed ? cols : rows);
  batch.push_back(transposed ? rows : cols);
  return Shape(std::move(batch));
}

TEST(MatmulInferTest, BatchDimsBroadcastAndTransposesApplyToTheLastTwo) {
  struct Case {
    Shape a, b;
    bool ta, tb, sum_batch;
    Shape out;
  };
  const std::vector<Case> cases = {
      {Shape({3, 5}), Shape({5, 7}), false, false, false, Shape({3, 7})},
      {Shape({2, 4, 3, 5}), Shape({5, 7}), false, false, false, Shape({2, 4, 3, 7})},
      {Shape({2, 4, 3, 5}), Shape({7, 5}), false, true, false, Shape({2, 4, 3, 7})},
      {Shape({3, 5}), Shape({6, 5, 7}), false, false, false, Shape({6, 3, 7})},
      {Shape({2, 4, 5, 3}), Shape({1, 4, 5, 7}), true, false, false, Shape({2, 4, 3, 7})},
      {Shape({2, 1, 3, 5}), Shape({4, 7, 5}), false, true, false, Shape({2, 4, 3, 7})},
      {Shape({0, 3, 5}), Shape({1, 5, 7}), false, false, false, Shape({0, 3, 7})},
      {Shape({2, 4, 6, 5}), Shape({2, 4, 6, 7}), true, false, true, Shape({5, 7})},
      {Shape({2, 6, 5}), Shape({2, 7, 6}), true, true, true, Shape({5, 7})},
  };
  for (const Case& c : cases) {
    auto out = InferShape(Matmul(c.ta, c.tb, 1.0, c.sum_batch), c.a, c.b);
    ASSERT_TRUE(out.ok()) << out.status() << " " << c.a << " " << c.b;
    EXPECT_EQ(*out, c.out) << c.a << " " << c.b;
  }
}

TEST(MatmulInferTest, ErrorsNameTheOpAndTheShapes) {
  struct Case {
    Shape a, b;
    bool tb, sum_batch;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {Shape({5}), Shape({5, 7}), false, false, {"rank >= 2", "(5,)"}},
      {Shape({3, 5}), Shape({7}), false, false, {"rank >= 2", "(7,)"}},
      {Shape({2, 3, 5}), Shape({4, 7}), false, false, {"k = 5 vs 4", "(2, 3, 5)", "(4, 7)"}},
      {Shape({2, 3, 5}), Shape({2, 5, 7}), true, false, {"transposed", "k = 5 vs 7"}},
      {Shape({2, 3, 5}), Shape({3, 5, 7}), false, false, {"broadcast", "(2, 3, 5)", "(3, 5, 7)"}},
      {Shape({4, 2, 3, 5}), Shape({3, 1, 5, 7}), false, false, {"broadcast"}},
      {Shape({2, 3, 5}), Shape({1, 5, 7}), false, true, {"sum_batch", "(1, 5, 7)"}},
      {Shape({2, 3, 5}), Shape({5, 7}), false, true, {"sum_batch"}},
  };
  for (const Case& c : cases) {
    auto out = InferShape(Matmul(false, c.tb, 1.0, c.sum_batch), c.a, c.b);
    ASSERT_FALSE(out.ok()) << c.a << " " << c.b;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    for (std::string piece : c.pieces) {
      EXPECT_NE(out.status().message().find(piece), std::string::npos)
          << "'" << piece << "' not in: " << out.status();
    }
    EXPECT_NE(out.status().message().find("op 'attn_scores' (matmul)"), std::string::npos)
        << out.status();
  }
  OpConf mistyped = Matmul(false, false);
  SetIntAttr(&mistyped, "sum_batch", 1);
  auto out = InferShape(mistyped, Shape({3, 5}), Shape({5, 7}));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("sum_batch"), std::string::npos) << out.status();
}

// One matmul form: the batch dims of a and b (before the matrices) and the
// matrix sizes.
struct Form {
  std::vector<int64_t> a_batch, b_batch;
  bool sum_batch;
};

std::vector<Form> Forms(int64_t batch) {
  return {
      {{}, {}, false},                  // 2-D
      {{batch, 2}, {}, false},          // Linear: one GEMM over the folded rows
      {{}, {batch}, false},             // 2-D a, batched b
      {{batch, 2}, {batch, 2}, false},  // attention
      {{batch, 1}, {2}, false},         // broadcast on both sides
      {{batch, 2}, {1, 2}, false},      // broadcast b along the leading axis
      {{batch, 2}, {batch, 2}, true},   // sum over the batch
  };
}

HostTensor Random(const Shape& shape, uint64_t seed) {
  return RandomTensor(TensorDesc(shape, DT_DOUBLE), seed, -1.0, 1.0);
}

TEST(MatmulGradTest, FiniteDifferencesForEveryFormTransposeAndSize) {
  struct Size {
    int64_t batch, m, k, n;
  };
  const std::vector<Size> sizes = {{3, 1, 5, 2}, {1, 1, 1, 1}, {3, 2, 3, 0},
                                   {0, 2, 3, 1}, {3, 3, 0, 2}, {2, 3, 5, 7}};
  uint64_t seed = 100;
  for (const Size& s : sizes) {
    for (const Form& form : Forms(s.batch)) {
      for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        OpConf op = Matmul(ta, tb, t == 2 ? -1.5 : 1.0, form.sum_batch);
        TensorMap env;
        env.emplace("a", Random(Stored(form.a_batch, s.m, s.k, ta), ++seed));
        env.emplace("b", Random(Stored(form.b_batch, s.k, s.n, tb), ++seed));
        Status status = CheckOpGradient(op, env);
        EXPECT_TRUE(status.ok()) << status << "\n a " << env.at("a").shape() << " b "
                                 << env.at("b").shape() << " ta " << ta << " tb " << tb
                                 << " sum_batch " << form.sum_batch;
      }
    }
  }
}

// Offered signatures as text ("S(0), B -> S(0)").
std::vector<std::string> CheckedSignatures(const OpConf& op, const TensorMap& env) {
  std::vector<std::string> texts;
  for (int64_t devices : {2, 3}) {
    auto result = CheckSbpSignatures(op, env, devices);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    texts.clear();
    for (const SbpSignature& sig : result->signatures) texts.push_back(sig.ToString());
  }
  return texts;
}

bool Has(const std::vector<std::string>& texts, const std::string& text) {
  return std::find(texts.begin(), texts.end(), text) != texts.end();
}

TEST(MatmulSbpTest, EverySignatureAgreesWithOneDevice) {
  const int64_t m = 6, k = 5, n = 7;
  uint64_t seed = 1;
  for (const Form& form : Forms(4)) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      OpConf op = Matmul(ta, tb, 0.5, form.sum_batch);
      TensorMap env;
      env.emplace("a", Random(Stored(form.a_batch, m, k, ta), ++seed));
      env.emplace("b", Random(Stored(form.b_batch, k, n, tb), ++seed));
      SCOPED_TRACE(::testing::Message() << "a " << env.at("a").shape() << " b "
                                        << env.at("b").shape() << " sum_batch " << form.sum_batch);
      const std::vector<std::string> texts = CheckedSignatures(op, env);
      const int64_t batch_axes =
          form.sum_batch ? form.a_batch.size() : std::max(form.a_batch.size(), form.b_batch.size());
      EXPECT_EQ(texts.size(), 5 + batch_axes);
      EXPECT_TRUE(Has(texts, "P, B -> P"));
      EXPECT_TRUE(Has(texts, "B, P -> P"));
    }
  }
}

TEST(MatmulSbpTest, BatchAxesSplitOperandsHoldingThemAndBroadcastTheOthers) {
  TensorMap env;
  env.emplace("a", Random(Shape({4, 3, 6, 5}), 1));
  env.emplace("b", Random(Shape({3, 5, 7}), 2));
  std::vector<std::string> texts = CheckedSignatures(Matmul(false, false), env);
  EXPECT_TRUE(Has(texts, "S(0), B -> S(0)"));
  EXPECT_TRUE(Has(texts, "S(1), S(0) -> S(1)"));
  EXPECT_TRUE(Has(texts, "S(2), B -> S(2)"));
  EXPECT_TRUE(Has(texts, "B, S(2) -> S(3)"));
  EXPECT_TRUE(Has(texts, "S(3), S(1) -> P"));

  // The Linear case's weight gradient: the batch split on both sums to P.
  env.clear();
  env.emplace("a", Random(Shape({4, 3, 6, 5}), 3));
  env.emplace("b", Random(Shape({4, 3, 6, 7}), 4));
  texts = CheckedSignatures(Matmul(true, false, 1.0, true), env);
  EXPECT_TRUE(Has(texts, "S(0), S(0) -> P"));
  EXPECT_TRUE(Has(texts, "S(1), S(1) -> P"));
  EXPECT_TRUE(Has(texts, "S(3), B -> S(0)"));
  EXPECT_TRUE(Has(texts, "S(2), S(2) -> P"));
}

}  // namespace
}  // namespace oflite
