// broadcast_add: shape inference and its errors, the CPU kernel's fast paths
// (equal shapes, an operand repeated along leading axes, in either order)
// and its strided path against a direct reference in float32/float64 at
// sizes 0, 1 and odd, finite-difference gradients, and every offered SBP
// signature on 2 and 3 devices.
#include <gtest/gtest.h>

#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"
#include "oneflow_lite/ops/math/math_util.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace math {
namespace {

OpConf BroadcastAdd() {
  return OpConfBuilder("broadcast_add", "ba").Input("x", "x").Input("y", "y").Output("out").Build();
}

// (x, y) shape pairs covering every kernel path, with sizes 0, 1 and odd.
struct AddCase {
  Shape x, y;
};
const std::vector<AddCase>& AddCases() {
  static const std::vector<AddCase> cases = {
      {Shape({0, 3}), Shape({3})},           // empty, y repeated
      {Shape({3}), Shape({0, 3})},           // empty, x repeated
      {Shape({1}), Shape({1})},              // equal
      {Shape({}), Shape({3})},               // scalar x
      {Shape({3, 5, 7}), Shape({3, 5, 7})},  // equal
      {Shape({3, 5, 7}), Shape({5, 7})},     // [B, T, C] + [T, C]
      {Shape({3, 5, 7}), Shape({7})},        // [B, T, C] + [C]
      {Shape({3, 5, 7}), Shape({1, 1, 7})},  // leading 1s
      {Shape({5, 7}), Shape({3, 5, 7})},     // x repeated
      {Shape({1, 5, 7}), Shape({3, 5, 7})},  // x repeated, leading 1
      {Shape({3, 1, 7}), Shape({5, 1})},     // both broadcast: strided
      {Shape({3, 5, 1}), Shape({3, 5, 7})},  // inner broadcast: strided
      {Shape({2, 3, 17}), Shape({3, 17})},   // odd vector tail
  };
  return cases;
}

Shape Broadcast(const Shape& x, const Shape& y) {
  Shape out;
  EXPECT_TRUE(BroadcastShapes(x, y, &out)) << x << y;
  return out;
}

// Element of `in` read at output index `index` (numpy broadcasting).
int64_t Source(const std::vector<int64_t>& index, const Shape& in) {
  const int64_t lead = static_cast<int64_t>(index.size()) - in.rank();
  std::vector<int64_t> at(in.rank());
  for (int64_t i = 0; i < in.rank(); ++i) at[i] = in.dim(i) == 1 ? 0 : index[i + lead];
  return Ravel(at, in);
}

template <typename T>
std::vector<double> ReferenceAdd(const HostTensor& x, const HostTensor& y, const Shape& out) {
  std::vector<double> want(out.elem_count());
  for (int64_t i = 0; i < out.elem_count(); ++i) {
    const std::vector<int64_t> index = Unravel(i, out);
    // Rounded as the kernel rounds: one addition in T.
    want[i] = x.data<T>()[Source(index, x.shape())] + y.data<T>()[Source(index, y.shape())];
  }
  return want;
}

TEST(BroadcastAddTest, InfersTheBroadcastShapeAndNamesTheOpOnErrors) {
  ASSERT_TRUE(LookupOpDef("broadcast_add").ok());
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape({2, 3, 4}), DT_FLOAT), 1));
  env.emplace("y", RandomTensor(TensorDesc(Shape({3, 4}), DT_FLOAT), 2));
  auto out = RunSingle(BroadcastAdd(), &env, "ba/out_0");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape(), Shape({2, 3, 4}));
  EXPECT_EQ(out->dtype(), DT_FLOAT);

  env["y"] = RandomTensor(TensorDesc(Shape({2, 4}), DT_FLOAT), 2);
  auto bad = RunSingle(BroadcastAdd(), &env, "ba/out_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'ba' (broadcast_add)"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("do not broadcast"), std::string::npos) << bad.status();

  env["y"] = RandomTensor(TensorDesc(Shape({3, 4}), DT_DOUBLE), 2);
  bad = RunSingle(BroadcastAdd(), &env, "ba/out_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'ba' (broadcast_add)"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("dtype mismatch"), std::string::npos) << bad.status();
}

TEST(BroadcastAddTest, EveryPathMatchesTheReferenceExactly) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    uint64_t seed = 10;
    for (const AddCase& c : AddCases()) {
      TensorMap env;
      env.emplace("x", RandomTensor(TensorDesc(c.x, dtype), ++seed));
      env.emplace("y", RandomTensor(TensorDesc(c.y, dtype), ++seed));
      const Shape out_shape = Broadcast(c.x, c.y);
      auto out = RunSingle(BroadcastAdd(), &env, "ba/out_0");
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->shape(), out_shape);
      const std::vector<double> want =
          dtype == DT_FLOAT ? ReferenceAdd<float>(env.at("x"), env.at("y"), out_shape)
                            : ReferenceAdd<double>(env.at("x"), env.at("y"), out_shape);
      EXPECT_EQ(ToDoubles(*out), want) << DataTypeName(dtype) << " " << c.x << " + " << c.y;
    }
  }
}

TEST(BroadcastAddTest, GradientsSumBackToEachOperandsShape) {
  uint64_t seed = 40;
  for (const AddCase& c : AddCases()) {
    TensorMap env;
    env.emplace("x", RandomTensor(TensorDesc(c.x, DT_DOUBLE), ++seed));
    env.emplace("y", RandomTensor(TensorDesc(c.y, DT_DOUBLE), ++seed));
    Status status = CheckOpGradient(BroadcastAdd(), env);
    EXPECT_TRUE(status.ok()) << status << c.x << " + " << c.y;
  }
}

TEST(BroadcastAddTest, EveryOfferedSbpSignatureAgreesWithOneDevice) {
  struct SbpCase {
    Shape x, y;
    size_t signatures;  // splits + P, P -> P (all-broadcast is implicit)
  };
  for (const SbpCase& c :
       {SbpCase{Shape({6, 5, 4}), Shape({5, 4}), 4}, SbpCase{Shape({6, 5, 4}), Shape({4}), 4},
        SbpCase{Shape({4}), Shape({6, 5, 4}), 4}, SbpCase{Shape({6, 1, 4}), Shape({6, 5, 1}), 4},
        SbpCase{Shape({7, 3}), Shape({7, 3}), 3}}) {
    TensorMap env;
    env.emplace("x", RandomTensor(TensorDesc(c.x, DT_DOUBLE), 1));
    env.emplace("y", RandomTensor(TensorDesc(c.y, DT_DOUBLE), 2));
    for (int64_t devices : {2, 3}) {
      auto result = CheckSbpSignatures(BroadcastAdd(), env, devices);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->signatures.size(), c.signatures) << c.x << " + " << c.y;
    }
  }
}

}  // namespace
}  // namespace math
}  // namespace oflite
