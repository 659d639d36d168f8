#include "oneflow_lite/common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace oflite {
namespace {

StatusOr<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgumentError("value ", x, " is not positive");
  return x;
}

Status UseTwice(int x, int* out) {
  ASSIGN_OR_RETURN(int v, ParsePositive(x));
  RETURN_IF_ERROR(v > 100 ? OutOfRangeError("too big: ", v) : Status::OK());
  *out = v * 2;
  return Status::OK();
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = NotFoundError("file '", "a.pb", "' missing");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "file 'a.pb' missing");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: file 'a.pb' missing");
  EXPECT_EQ(s.WithContext("loading plan").message(), "loading plan: file 'a.pb' missing");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

TEST(StatusTest, CopiesCompareEqual) {
  Status a = AbortedError("rank 2 lost");
  Status b = a;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, AbortedError("rank 3 lost"));
  EXPECT_NE(a, UnavailableError("rank 2 lost"));
}

TEST(StatusOrTest, ValueAndError) {
  StatusOr<int> good = ParsePositive(3);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  StatusOr<int> bad = ParsePositive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "value -1 is not positive");
}

TEST(StatusOrTest, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(UseTwice(21, &out).ok());
  EXPECT_EQ(out, 42);
  EXPECT_EQ(UseTwice(0, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(UseTwice(101, &out).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(out, 42);
}

TEST(StatusOrTest, MoveOnlyValue) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> v = std::move(p).value();
  EXPECT_EQ(*v, 7);
}

TEST(StatusOrDeathTest, ValueOnErrorDies) {
  StatusOr<int> bad = InternalError("boom");
  EXPECT_DEATH((void)bad.value(), "boom");
}

}  // namespace
}  // namespace oflite
