// select_rows at sizes 0, 1 and odd, every x dtype and mask dtype: the
// kept rows come out first, in order, and the output desc is dynamic.
#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace nn {
namespace {

OpConf SelectRows() {
  return OpConfBuilder("select_rows", "select")
      .Input("x", "x")
      .Input("mask", "mask")
      .Output("y")
      .Build();
}

TEST(SelectRowsKernelTest, KeepsTheMaskedRowsInOrder) {
  for (DataType x_type : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
    for (DataType mask_type : {DT_INT32, DT_INT64, DT_FLOAT, DT_DOUBLE}) {
      for (int64_t rows : {0, 1, 7}) {
        TensorMap env;
        env["x"] = RandomTensor(TensorDesc(Shape{rows, 3}, x_type), 11 + rows, -50, 50);
        env["mask"] = RandomTensor(TensorDesc(Shape{rows}, mask_type), 5 + rows, 0, 2);
        StatusOr<TensorMap> out = RunOp(SelectRows(), &env);
        ASSERT_TRUE(out.ok()) << out.status();
        const HostTensor& y = out->at("select/y_0");
        EXPECT_TRUE(y.desc().is_dynamic);
        const std::vector<double> x = testing::ToDoubles(env["x"]);
        const std::vector<double> mask = testing::ToDoubles(env["mask"]);
        const std::vector<double> got = testing::ToDoubles(y);
        int64_t kept = 0;
        for (int64_t row = 0; row < rows; ++row) {
          if (mask[row] == 0) continue;
          for (int64_t c = 0; c < 3; ++c) {
            EXPECT_EQ(got[kept * 3 + c], x[row * 3 + c])
                << DataTypeName(x_type) << " mask " << DataTypeName(mask_type) << " row " << row;
          }
          ++kept;
        }
      }
    }
  }
}

TEST(SelectRowsKernelTest, InferenceRefusesAMismatchedMask) {
  ArgDescs inputs;
  inputs["x"] = {TensorDesc(Shape{4, 2}, DT_FLOAT)};
  inputs["mask"] = {TensorDesc(Shape{3}, DT_INT32)};
  StatusOr<ArgDescs> inferred = InferOp(SelectRows(), inputs);
  ASSERT_FALSE(inferred.ok());
  EXPECT_NE(inferred.status().message().find("mask must be a numeric [N]"), std::string::npos)
      << inferred.status();
  inputs["mask"] = {TensorDesc(Shape{4}, DT_INT32)};
  inferred = InferOp(SelectRows(), inputs);
  ASSERT_TRUE(inferred.ok()) << inferred.status();
  EXPECT_EQ(inferred->at("y")[0].ToString(), "float32(4, 2)*");
}

}  // namespace
}  // namespace nn
}  // namespace oflite
