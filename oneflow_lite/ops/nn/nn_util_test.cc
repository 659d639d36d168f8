#include "oneflow_lite/ops/nn/nn_util.h"

#include <gtest/gtest.h>

#include "oneflow_lite/ops/op_builder.h"

namespace oflite {
namespace nn {
namespace {

TEST(NormalizeAxisTest, MapsNegativeAndRejectsOutOfRange) {
  EXPECT_EQ(*NormalizeAxis(-1, 3), 2);
  EXPECT_EQ(*NormalizeAxis(0, 1), 0);
  EXPECT_EQ(*NormalizeAxis(-3, 3), 0);
  EXPECT_FALSE(NormalizeAxis(3, 3).ok());
  EXPECT_FALSE(NormalizeAxis(-4, 3).ok());
  EXPECT_NE(NormalizeAxis(5, 2).status().message().find("axis 5"), std::string::npos);
}

TEST(Window2dTest, ConvOutputSizes) {
  OpConf op = OpConfBuilder("conv2d", "c")
                  .Attr("strides", std::vector<int64_t>{2, 1})
                  .Attr("padding", std::vector<int64_t>{1, 0})
                  .Attr("dilations", std::vector<int64_t>{1, 2})
                  .Build();
  auto w = MakeConvWindow(AttrView(op), Shape({2, 3, 7, 9}), Shape({4, 3, 3, 3}));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->out_h, (7 + 2 - 3) / 2 + 1);  // 4
  EXPECT_EQ(w->out_w, (9 - 5) / 1 + 1);      // 5
  EXPECT_EQ(w->channels, 3);
}

TEST(Window2dTest, RejectsBadAttributesAndNonFittingWindows) {
  OpConf zero_stride =
      OpConfBuilder("conv2d", "c").Attr("strides", std::vector<int64_t>{0, 1}).Build();
  auto w = MakeConvWindow(AttrView(zero_stride), Shape({1, 1, 5, 5}), Shape({1, 1, 3, 3}));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("strides"), std::string::npos) << w.status();

  OpConf plain = OpConfBuilder("conv2d", "c").Build();
  w = MakeConvWindow(AttrView(plain), Shape({1, 1, 2, 5}), Shape({1, 1, 3, 3}));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("(1, 1, 2, 5)"), std::string::npos) << w.status();

  w = MakeConvWindow(AttrView(plain), Shape({1, 2, 5, 5}), Shape({1, 3, 3, 3}));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("(1, 3, 3, 3)"), std::string::npos) << w.status();

  OpConf pool = OpConfBuilder("max_pool2d", "p")
                    .Attr("kernel_size", std::vector<int64_t>{2, 2})
                    .Attr("padding", std::vector<int64_t>{2, 0})
                    .Build();
  w = MakePoolWindow(AttrView(pool), Shape({1, 1, 5, 5}));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("padding"), std::string::npos) << w.status();
}

TEST(DropoutUniformTest, DeterministicAndKeyed) {
  EXPECT_EQ(DropoutUniform(1, 2, 3, 4), DropoutUniform(1, 2, 3, 4));
  EXPECT_NE(DropoutUniform(1, 2, 3, 4), DropoutUniform(1, 3, 3, 4));
  EXPECT_NE(DropoutUniform(1, 2, 3, 4), DropoutUniform(1, 2, 4, 4));
  EXPECT_NE(DropoutUniform(1, 2, 3, 4), DropoutUniform(2, 2, 3, 4));
  // Roughly uniform: the mean of many draws is near 1/2, all in [0, 1).
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double u = DropoutUniform(7, 0, 0, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
}

TEST(DropoutRateTest, Validates) {
  EXPECT_TRUE(DropoutRate(AttrView(OpConfBuilder("dropout", "d").Attr("rate", 0.0).Build())).ok());
  EXPECT_FALSE(DropoutRate(AttrView(OpConfBuilder("dropout", "d").Attr("rate", 1.0).Build())).ok());
  EXPECT_FALSE(
      DropoutRate(AttrView(OpConfBuilder("dropout", "d").Attr("rate", -0.1).Build())).ok());
  EXPECT_FALSE(DropoutRate(AttrView(OpConfBuilder("dropout", "d").Build())).ok());
}

}  // namespace
}  // namespace nn
}  // namespace oflite
