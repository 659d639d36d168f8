#include <gtest/gtest.h>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/tensor.h"

namespace oflite {
namespace {

TEST(ShapeTest, CountsAndPrinting) {
  Shape s{64, 1, 28, 28};
  EXPECT_EQ(s.rank(), 4);
  EXPECT_EQ(s.elem_count(), 64 * 28 * 28);
  EXPECT_EQ(s.Count(1), 28 * 28);
  EXPECT_EQ(s.Count(1, 3), 28);
  EXPECT_EQ(s.ToString(), "(64, 1, 28, 28)");
  EXPECT_EQ(Shape{}.elem_count(), 1);
  EXPECT_EQ(Shape{}.ToString(), "()");
  EXPECT_EQ(Shape{5}.ToString(), "(5,)");
  EXPECT_EQ(Shape({0, 3}).elem_count(), 0);
  EXPECT_EQ(Shape(s.ToProto()), s);
}

TEST(TensorDescTest, BytesAndProto) {
  TensorDesc d(Shape{3, 5}, DT_FLOAT);
  EXPECT_EQ(d.ByteSize(), 60);
  EXPECT_EQ(d.ToString(), "float32(3, 5)");
  EXPECT_EQ(TensorDesc(d.ToProto()), d);
  EXPECT_EQ(SizeOf(DT_INT64), 8);
  EXPECT_EQ(SizeOf(DT_INVALID), 0);
}

TEST(AttrTest, SetGetSortedAndTyped) {
  OpConf op;
  op.set_name("conv1");
  op.set_op_type("conv2d");
  SetIntsAttr(&op, "strides", {2, 2});
  SetIntAttr(&op, "filters", 32);
  SetFloatAttr(&op, "alpha", 0.5);
  SetShapeAttr(&op, "kernel", Shape{3, 3});
  SetIntAttr(&op, "filters", 64);  // replace
  ASSERT_EQ(op.attr_size(), 4);
  EXPECT_EQ(op.attr(0).key(), "alpha");
  EXPECT_EQ(op.attr(3).key(), "strides");
  AttrView attrs(op);
  EXPECT_EQ(*attrs.GetInt("filters"), 64);
  EXPECT_EQ(*attrs.GetFloat("alpha"), 0.5);
  EXPECT_EQ(*attrs.GetShape("kernel"), Shape({3, 3}));
  EXPECT_EQ(attrs.GetIntsOr("strides", {}), std::vector<int64_t>({2, 2}));
  EXPECT_EQ(attrs.GetIntOr("missing", 7), 7);
  SetIntsAttr(&op, "empty", {});
  auto empty = AttrView(op).GetInts("empty");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  auto wrong_type = attrs.GetInt("alpha");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("conv1"), std::string::npos);
  EXPECT_NE(wrong_type.status().message().find("alpha"), std::string::npos);
}

}  // namespace
}  // namespace oflite
