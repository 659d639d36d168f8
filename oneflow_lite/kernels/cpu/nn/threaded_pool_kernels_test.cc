// The pooling kernels split their planes over threads
// (kernels/cpu/parallel_rows.h): max_pool2d, avg_pool2d, adaptive_avg_pool2d
// and their grads give the same bits on 1, 2 and 3 threads at a CNN size
// (the 2x2 direct path) and at odd ones (3x3 windows with padding, 2x2
// windows leaving a row and a column out, overlapping adaptive bins), write
// every output element, and their grads hand on all of dy. Every case is
// large enough for 3 threads (kMinWorkPerThread each). Values against a
// reference: pool_kernels_test.cc, index_pool_loss_kernels_test.cc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

// Every output of every run has the bytes of the first run's, and no
// element is left NaN (RunOp fills outputs with NaN before the call).
void ExpectSameBitsAllWritten(const std::vector<TensorMap>& outs, const std::string& what) {
  for (size_t run = 0; run < outs.size(); ++run) {
    for (const auto& [lbn, first] : outs[0]) {
      const HostTensor& other = outs[run].at(lbn);
      ASSERT_EQ(other.ByteSize(), first.ByteSize()) << what << " " << lbn;
      EXPECT_EQ(std::memcmp(other.raw(), first.raw(), first.ByteSize()), 0)
          << what << " " << lbn << ": run " << run << " differs from one thread";
      const std::vector<double> values = ToDoubles(other);
      const auto nan = std::find_if(values.begin(), values.end(),
                                    [](double v) { return std::isnan(v); });
      EXPECT_EQ(nan, values.end()) << what << " " << lbn << ": element "
                                   << (nan - values.begin()) << " not written, run " << run;
    }
  }
}

double Sum(const HostTensor& t) {
  double sum = 0;
  for (double v : ToDoubles(t)) sum += v;
  return sum;
}

struct PoolCase {
  Shape x;
  std::vector<int64_t> kernel, strides, padding;
};

OpConf PoolOp(const std::string& type, const PoolCase& c) {
  OpConfBuilder b(type, "pool");
  if (type == "max_pool2d" || type == "avg_pool2d") {
    b.Input("x", "in/x_0").Output("y");
  } else if (type == "max_pool2d_grad") {
    b.Input("dy", "in/dy_0").Input("x", "in/x_0").Input("y", "pool/y_0").Output("dx");
  } else {
    b.Input("dy", "in/dy_0").Input("like", "in/x_0").Output("dx");
  }
  return b.Attr("kernel_size", c.kernel)
      .Attr("strides", c.strides)
      .Attr("padding", c.padding)
      .Build();
}

TEST(ThreadedPoolKernelsTest, SameBitsOnAnyThreadCount) {
  const std::vector<PoolCase> cases = {
      // LeNet-5's first pooling at batch 32: the 2x2 direct path.
      {Shape({32, 6, 28, 28}), {2, 2}, {2, 2}, {0, 0}},
      // 3x3 windows at stride 2 with padding (overlapping, clipped).
      {Shape({13, 7, 33, 29}), {3, 3}, {2, 2}, {1, 1}},
      // 2x2 windows leaving the last row and column out (dx zero-filled).
      {Shape({17, 7, 33, 29}), {2, 2}, {2, 2}, {0, 0}},
  };
  for (const PoolCase& c : cases) {
    for (DataType dtype : FloatTypes()) {
      for (const std::string kind : {"max_pool2d", "avg_pool2d"}) {
        const std::string what = kind + " " + DataTypeName(dtype) + " " + c.x.ToString();
        TensorMap env;
        env.emplace("in/x_0", RandomTensor(TensorDesc(c.x, dtype), 1, -3, 3));
        std::vector<TensorMap> forward = RunOnThreads(PoolOp(kind, c), &env);
        ExpectSameBitsAllWritten(forward, what);
        const HostTensor& y = forward[0].at("pool/y_0");
        env.emplace("in/dy_0", RandomTensor(y.desc(), 2, -3, 3));
        env.emplace("pool/y_0", y.Clone());
        std::vector<TensorMap> backward = RunOnThreads(PoolOp(kind + "_grad", c), &env);
        ExpectSameBitsAllWritten(backward, what + " grad");
        // Each window hands all of its dy on to x (to its maximum, or
        // shared among its in-bounds elements).
        const double dy_sum = Sum(env.at("in/dy_0"));
        EXPECT_NEAR(Sum(backward[0].at("pool/dx_0")), dy_sum, 1e-3 * (1 + std::fabs(dy_sum)))
            << what;
      }
    }
  }
}

TEST(ThreadedPoolKernelsTest, AdaptiveSameBitsOnAnyThreadCount) {
  const Shape x({32, 6, 28, 28});
  const std::vector<int64_t> output_size = {5, 3};  // overlapping bins
  for (DataType dtype : FloatTypes()) {
    const std::string what = std::string(DataTypeName(dtype)) + " " + x.ToString();
    TensorMap env;
    env.emplace("in/x_0", RandomTensor(TensorDesc(x, dtype), 1, -3, 3));
    const OpConf forward_op = OpConfBuilder("adaptive_avg_pool2d", "ap")
                                  .Input("x", "in/x_0")
                                  .Output("y")
                                  .Attr("output_size", output_size)
                                  .Build();
    std::vector<TensorMap> forward = RunOnThreads(forward_op, &env);
    ExpectSameBitsAllWritten(forward, "adaptive_avg_pool2d " + what);
    env.emplace("in/dy_0", RandomTensor(forward[0].at("ap/y_0").desc(), 2, -3, 3));
    const OpConf grad_op = OpConfBuilder("adaptive_avg_pool2d_grad", "apg")
                               .Input("dy", "in/dy_0")
                               .Input("like", "in/x_0")
                               .Output("dx")
                               .Attr("output_size", output_size)
                               .Build();
    std::vector<TensorMap> backward = RunOnThreads(grad_op, &env);
    ExpectSameBitsAllWritten(backward, "adaptive_avg_pool2d_grad " + what);
    const double dy_sum = Sum(env.at("in/dy_0"));
    EXPECT_NEAR(Sum(backward[0].at("apg/dx_0")), dy_sum, 1e-3 * (1 + std::fabs(dy_sum))) << what;
  }
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
