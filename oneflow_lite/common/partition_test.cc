#include "oneflow_lite/common/partition.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace oflite {
namespace {

// Every part of every (length, parts) in a small matrix: parts tile the
// length in order, sizes differ by at most one, the larger ones come first.
TEST(BalancedPartTest, PartsTileTheLengthInOrder) {
  for (int64_t length : {0, 1, 2, 7, 8, 13}) {
    for (int64_t parts : {1, 2, 3, 4, 9}) {
      int64_t next = 0;
      for (int64_t i = 0; i < parts; ++i) {
        const PartRange range = BalancedPart(length, parts, i);
        EXPECT_EQ(range.begin, next) << length << " over " << parts << ", part " << i;
        EXPECT_EQ(range.size, length / parts + (i < length % parts ? 1 : 0));
        next = range.end();
      }
      EXPECT_EQ(next, length) << length << " over " << parts;
    }
  }
}

TEST(BalancedPartTest, ExactValues) {
  EXPECT_EQ(BalancedPart(0, 3, 2), (PartRange{0, 0}));
  EXPECT_EQ(BalancedPart(1, 1, 0), (PartRange{0, 1}));
  EXPECT_EQ(BalancedPart(7, 3, 0), (PartRange{0, 3}));
  EXPECT_EQ(BalancedPart(7, 3, 1), (PartRange{3, 2}));
  EXPECT_EQ(BalancedPart(7, 3, 2), (PartRange{5, 2}));
  // More parts than elements: the first ones get one each, the rest none.
  EXPECT_EQ(BalancedPart(2, 5, 1), (PartRange{1, 1}));
  EXPECT_EQ(BalancedPart(2, 5, 2), (PartRange{2, 0}));
  EXPECT_EQ(BalancedPart(2, 5, 4), (PartRange{2, 0}));
}

TEST(BalancedPartTest, PartShape) {
  EXPECT_EQ(BalancedPartShape(Shape({5, 7}), 1, 3, 2), Shape({5, 2}));
  EXPECT_EQ(BalancedPartShape(Shape({5, 7}), 0, 3, 0), Shape({2, 7}));
  EXPECT_EQ(BalancedPartShape(Shape({1}), 0, 2, 1), Shape({0}));
}

TEST(BalancedPartDeathTest, ZeroPartsIsAProgrammerBug) {
  EXPECT_DEATH(BalancedPart(4, 0, 0), "balanced part 0 of 0");
  EXPECT_DEATH(BalancedPart(4, 2, 2), "balanced part 2 of 2");
}

std::vector<int32_t> Iota(int64_t count) {
  std::vector<int32_t> values(count);
  std::iota(values.begin(), values.end(), 0);
  return values;
}

// Cutting every part out of a whole and putting the parts back into a
// zeroed whole gives the whole again; each part holds exactly its slab.
TEST(SlabCopyTest, RoundTripOnEveryAxis) {
  const Shape whole({3, 5, 2});
  const std::vector<int32_t> data = Iota(whole.elem_count());
  for (int64_t axis = 0; axis < whole.rank(); ++axis) {
    for (int64_t parts : {1, 2, 4, 7}) {
      std::vector<int32_t> rebuilt(data.size(), -1);
      for (int64_t i = 0; i < parts; ++i) {
        const PartRange range = BalancedPart(whole.dim(axis), parts, i);
        const Shape part_shape = BalancedPartShape(whole, axis, parts, i);
        std::vector<int32_t> part(part_shape.elem_count(), -7);
        CopyWholeToPart(whole, axis, range, sizeof(int32_t), data.data(), part.data());
        // Element (a, b, c) of the part is element (a, b, c) + range.begin
        // on `axis` of the whole.
        for (int64_t k = 0; k < part_shape.elem_count(); ++k) {
          int64_t index[3] = {k / (part_shape.dim(1) * part_shape.dim(2)),
                              k / part_shape.dim(2) % part_shape.dim(1), k % part_shape.dim(2)};
          index[axis] += range.begin;
          EXPECT_EQ(part[k], (index[0] * 5 + index[1]) * 2 + index[2]);
        }
        CopyPartToWhole(whole, axis, range, sizeof(int32_t), part.data(), rebuilt.data());
      }
      EXPECT_EQ(rebuilt, data) << "axis " << axis << ", " << parts << " parts";
    }
  }
}

TEST(SlabCopyTest, EmptySlabTouchesNothing) {
  const Shape whole({2, 3});
  std::vector<float> data(6, 1.0f);
  CopyWholeToPart(whole, 1, PartRange{3, 0}, sizeof(float), data.data(), nullptr);
  CopyPartToWhole(whole, 0, PartRange{1, 0}, sizeof(float), nullptr, data.data());
  CopyPartToWhole(Shape({0, 4}), 0, PartRange{0, 0}, sizeof(float), nullptr, nullptr);
  EXPECT_EQ(data, std::vector<float>(6, 1.0f));
}

TEST(SlabCopyDeathTest, RangeOutsideTheAxisIsAProgrammerBug) {
  std::vector<float> data(6), part(6);
  EXPECT_DEATH(CopyWholeToPart(Shape({2, 3}), 1, PartRange{2, 2}, sizeof(float), data.data(),
                               part.data()),
               "outside axis 1");
}

TEST(AccumulateTest, EverySupportedType) {
  std::vector<double> d = {1.5, -2}, d_in = {0.25, 2};
  ASSERT_TRUE(AccumulateInto(DT_DOUBLE, d_in.data(), d.data(), 2).ok());
  EXPECT_EQ(d, (std::vector<double>{1.75, 0}));
  std::vector<float> f = {1, 2, 3}, f_in = {10, 20, 30};
  ASSERT_TRUE(AccumulateInto(DT_FLOAT, f_in.data(), f.data(), 2).ok());
  EXPECT_EQ(f, (std::vector<float>{11, 22, 3}));  // count bounds the sum
  std::vector<int32_t> i = {7}, i_in = {-9};
  ASSERT_TRUE(AccumulateInto(DT_INT32, i_in.data(), i.data(), 1).ok());
  EXPECT_EQ(i[0], -2);
  std::vector<int64_t> l = {int64_t{1} << 40}, l_in = {1};
  ASSERT_TRUE(AccumulateInto(DT_INT64, l_in.data(), l.data(), 1).ok());
  EXPECT_EQ(l[0], (int64_t{1} << 40) + 1);
  ASSERT_TRUE(AccumulateInto(DT_FLOAT, nullptr, nullptr, 0).ok());
}

// Lengths around the vectorised block (16 elements) and its remainder, and
// an overlapping pair, which must keep the element-by-element meaning.
TEST(AccumulateTest, ExactOverLengthsAndOverlap) {
  for (int64_t count : {0, 1, 15, 16, 17, 33, 1001}) {
    SCOPED_TRACE(count);
    std::vector<int64_t> sum(count + 1, -7), in(count);
    std::vector<float> fsum(count), fin(count);
    for (int64_t i = 0; i < count; ++i) {
      sum[i] = 3 * i;
      in[i] = (int64_t{1} << 40) + i;
      fsum[i] = 0.5f * i;
      fin[i] = 0.25f * i;
    }
    ASSERT_TRUE(AccumulateInto(DT_INT64, in.data(), sum.data(), count).ok());
    ASSERT_TRUE(AccumulateInto(DT_FLOAT, fin.data(), fsum.data(), count).ok());
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(sum[i], (int64_t{1} << 40) + 4 * i) << i;
      ASSERT_EQ(fsum[i], 0.75f * i) << i;
    }
    EXPECT_EQ(sum[count], -7);  // nothing beyond count
  }
  std::vector<int32_t> overlap = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  // out[i] += in[i] with out = in + 1, one element after another: 1, 2, ..., 20.
  ASSERT_TRUE(AccumulateInto(DT_INT32, overlap.data(), overlap.data() + 1, 19).ok());
  for (int32_t i = 0; i < 20; ++i) ASSERT_EQ(overlap[i], i + 1) << i;
}

TEST(AccumulateTest, UnsupportedTypeNamesIt) {
  std::vector<uint8_t> a(4), b(4);
  const Status status = AccumulateInto(DT_UINT8, a.data(), b.data(), 4);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(status.message().find(DataTypeName(DT_UINT8)), std::string::npos) << status.ToString();
  EXPECT_FALSE(CanAccumulate(DT_UINT8));
  EXPECT_TRUE(CanAccumulate(DT_INT64));
}

}  // namespace
}  // namespace oflite
