// The host_feed op and its CPU kernel: shape inference, every dtype and
// sizes 0, 1 and odd, one tensor per iteration in push order, bounded
// waits and mismatches naming the op, the feed and the iteration.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "oneflow_lite/data/host_feed.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

OpConf HostFeedOp(const std::string& feed, const Shape& shape, DataType dtype,
                  int64_t timeout_ms = 10000) {
  return OpConfBuilder("host_feed", "x")
      .Output("out")
      .Attr("feed", feed)
      .Attr("shape", shape)
      .Attr("dtype", dtype)
      .Attr("timeout_ms", timeout_ms)
      .Build();
}

StatusOr<HostTensor> RunFeed(const OpConf& op, DataType dtype, int64_t iteration) {
  TensorMap env;
  RunOpOptions options;
  options.dtype = dtype;
  options.iteration = iteration;
  ASSIGN_OR_RETURN(TensorMap out, RunOp(op, &env, options));
  return std::move(out.at("x/out_0"));
}

template <typename T>
void CheckRoundTrip(DataType dtype, const Shape& shape) {
  const std::string feed =
      std::string("host_feed_kernel_test.") + DataTypeName(dtype) + shape.ToString();
  const OpConf op = HostFeedOp(feed, shape, dtype);
  for (int64_t iteration = 0; iteration < 3; ++iteration) {
    std::vector<T> values(static_cast<size_t>(shape.elem_count()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(iteration * 100 + i);
    ASSERT_TRUE(HostFeed::Push(feed, HostTensor::FromVector<T>(shape, values)).ok());
  }
  for (int64_t iteration = 0; iteration < 3; ++iteration) {
    StatusOr<HostTensor> out = RunFeed(op, dtype, iteration);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->desc(), TensorDesc(shape, dtype));
    const std::vector<T> got = out->ToVector<T>();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], static_cast<T>(iteration * 100 + i)) << feed << " " << i;
    }
  }
  EXPECT_EQ(HostFeed::Pending(feed), 0);
}

TEST(HostFeedOpTest, InfersItsAttrs) {
  StatusOr<ArgDescs> descs = InferOp(HostFeedOp("f", Shape{1, 7}, DT_INT64), {});
  ASSERT_TRUE(descs.ok()) << descs.status();
  EXPECT_EQ(descs->at("out").at(0), TensorDesc(Shape{1, 7}, DT_INT64));
  EXPECT_TRUE(InferOp(HostFeedOp("f", Shape{}, DT_FLOAT), {}).ok());
  EXPECT_TRUE(InferOp(HostFeedOp("f", Shape{0, 3}, DT_FLOAT), {}).ok());
}

TEST(HostFeedOpTest, RefusesBadAttrsNamingTheOp) {
  auto message = [](const OpConf& op) { return InferOp(op, {}).status().message(); };
  EXPECT_NE(message(HostFeedOp("", Shape{2}, DT_FLOAT)).find("op 'x' (host_feed): feed must"),
            std::string::npos);
  EXPECT_NE(message(HostFeedOp("f", Shape{2}, DT_BOOL)).find("dtype must be int32, int64"),
            std::string::npos);
  EXPECT_NE(message(HostFeedOp("f", Shape{2}, DT_FLOAT, 0)).find("timeout_ms must be > 0"),
            std::string::npos);
  OpConf no_feed = OpConfBuilder("host_feed", "x")
                       .Output("out")
                       .Attr("shape", Shape{2})
                       .Attr("dtype", DT_FLOAT)
                       .Build();
  EXPECT_FALSE(InferOp(no_feed, {}).ok());
}

TEST(HostFeedKernelTest, EveryDtypeAndSizeInPushOrder) {
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{1}, Shape{3, 5}}) {
    CheckRoundTrip<int32_t>(DT_INT32, shape);
    CheckRoundTrip<int64_t>(DT_INT64, shape);
    CheckRoundTrip<float>(DT_FLOAT, shape);
    CheckRoundTrip<double>(DT_DOUBLE, shape);
  }
}

TEST(HostFeedKernelTest, AWaitPastTheTimeoutNamesTheOpTheFeedAndTheIteration) {
  const OpConf op = HostFeedOp("host_feed_kernel_test.empty", Shape{2}, DT_FLOAT, 50);
  const auto begin = std::chrono::steady_clock::now();
  StatusOr<HostTensor> out = RunFeed(op, DT_FLOAT, 4);
  EXPECT_GE(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(50));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
  const std::string& message = out.status().message();
  EXPECT_NE(message.find("op 'x' (host_feed) at iteration 4"), std::string::npos) << message;
  EXPECT_NE(message.find("host feed 'host_feed_kernel_test.empty'"), std::string::npos) << message;
  EXPECT_NE(message.find("50 ms"), std::string::npos) << message;
}

TEST(HostFeedKernelTest, ATensorOfAnotherShapeOrDtypeNamesBoth) {
  const std::string feed = "host_feed_kernel_test.mismatch";
  const OpConf op = HostFeedOp(feed, Shape{2, 3}, DT_FLOAT);
  ASSERT_TRUE(HostFeed::Push(feed, HostTensor(TensorDesc(Shape{3, 2}, DT_FLOAT))).ok());
  StatusOr<HostTensor> out = RunFeed(op, DT_FLOAT, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("op 'x' (host_feed) at iteration 1: feed "
                                        "'host_feed_kernel_test.mismatch' delivered "
                                        "float32(3, 2), but the op takes float32(2, 3)"),
            std::string::npos)
      << out.status();
  ASSERT_TRUE(HostFeed::Push(feed, HostTensor(TensorDesc(Shape{2, 3}, DT_INT32))).ok());
  out = RunFeed(op, DT_FLOAT, 2);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("delivered int32(2, 3)"), std::string::npos)
      << out.status();
}

TEST(HostFeedKernelTest, SeveralDevicesAreRefused) {
  const std::string feed = "host_feed_kernel_test.devices";
  ASSERT_TRUE(HostFeed::Push(feed, HostTensor(TensorDesc(Shape{2}, DT_FLOAT))).ok());
  TensorMap env;
  RunOpOptions options;
  options.dtype = DT_FLOAT;
  options.parallel_num = 2;
  StatusOr<TensorMap> out = RunOp(HostFeedOp(feed, Shape{2}, DT_FLOAT), &env, options);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("runs on one device, but its placement has 2"),
            std::string::npos)
      << out.status();
  HostFeed::Reset(feed);
}

}  // namespace
}  // namespace oflite
