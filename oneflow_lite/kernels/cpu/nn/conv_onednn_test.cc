// The float32 conv2d kernels on oneDNN against the reference kernels
// (im2col + OpenBLAS GEMM, kernels/cpu/cpu_library.h kReference): forward,
// data gradient and filter gradient over odd shapes, strides, padding,
// dilations, batch 1, pointwise kernels and a window that never reads the
// last input rows. Tolerance: |oneDNN - reference| <= 1e-4 * max(1, |ref|)
// (float32 sums of up to a few hundred products, accumulated in different
// orders). Also: primitives are built once per kernel object and batch size,
// and the reference selection really bypasses oneDNN.
#include <cmath>
#include <string>

#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"
#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

constexpr double kTolerance = 1e-4;

struct Case {
  Shape x, weight;
  std::vector<int64_t> strides, padding, dilations;
};

std::vector<Case> Cases() {
  return {
      {Shape({1, 1, 1, 1}), Shape({1, 1, 1, 1}), {1, 1}, {0, 0}, {1, 1}},
      {Shape({2, 3, 7, 5}), Shape({4, 3, 3, 3}), {2, 2}, {1, 1}, {1, 1}},
      {Shape({1, 2, 9, 7}), Shape({3, 2, 3, 2}), {1, 2}, {2, 1}, {2, 1}},
      {Shape({3, 5, 4, 3}), Shape({2, 5, 1, 1}), {1, 1}, {0, 0}, {1, 1}},   // pointwise
      {Shape({1, 1, 11, 13}), Shape({2, 1, 5, 5}), {3, 3}, {2, 4}, {1, 1}},
      {Shape({2, 3, 8, 8}), Shape({5, 3, 3, 3}), {2, 2}, {0, 0}, {1, 1}},   // row 7 never read
      {Shape({1, 2, 8, 9}), Shape({3, 2, 3, 3}), {1, 1}, {2, 2}, {2, 2}},   // dilation + pad
      {Shape({3, 16, 14, 14}), Shape({32, 16, 3, 3}), {1, 1}, {1, 1}, {1, 1}},  // the CNN's
      {Shape({1, 1, 28, 28}), Shape({6, 1, 5, 5}), {1, 1}, {2, 2}, {1, 1}},     // LeNet-5's
      {Shape({5, 6, 13, 11}), Shape({7, 6, 4, 2}), {2, 1}, {1, 0}, {1, 3}},
  };
}

Shape OutShape(const Case& c) {
  const int64_t kh = c.weight.dim(2), kw = c.weight.dim(3);
  const int64_t oh = (c.x.dim(2) + 2 * c.padding[0] - c.dilations[0] * (kh - 1) - 1) /
                         c.strides[0] + 1;
  const int64_t ow = (c.x.dim(3) + 2 * c.padding[1] - c.dilations[1] * (kw - 1) - 1) /
                         c.strides[1] + 1;
  return Shape({c.x.dim(0), c.weight.dim(0), oh, ow});
}

// The op of one pass with its inputs drawn from `seed`; the output's lbn.
struct PassOp {
  OpConf op;
  TensorMap env;
  std::string output;
};

PassOp MakePass(const Case& c, onednn::ConvPass pass, uint64_t seed) {
  const std::string type = pass == onednn::ConvPass::kForward        ? "conv2d"
                           : pass == onednn::ConvPass::kBackwardData ? "conv2d_grad_data"
                                                                     : "conv2d_grad_filter";
  const std::string out = pass == onednn::ConvPass::kForward        ? "y"
                          : pass == onednn::ConvPass::kBackwardData ? "dx"
                                                                    : "dw";
  OpConfBuilder builder(type, "c");
  PassOp p;
  auto input = [&](const std::string& arg, const Shape& shape, bool random) {
    const std::string lbn = "in/" + arg + "_0";
    builder.Input(arg, lbn);
    p.env.emplace(lbn, random ? RandomTensor(TensorDesc(shape, DT_FLOAT), seed++)
                              : HostTensor(TensorDesc(shape, DT_FLOAT)));
  };
  if (pass == onednn::ConvPass::kForward) {
    input("x", c.x, true);
    input("weight", c.weight, true);
  } else if (pass == onednn::ConvPass::kBackwardData) {
    input("dy", OutShape(c), true);
    input("weight", c.weight, true);
    input("like", c.x, false);
  } else {
    input("dy", OutShape(c), true);
    input("x", c.x, true);
    input("like", c.weight, false);
  }
  p.op = builder.Output(out)
             .Attr("strides", c.strides)
             .Attr("padding", c.padding)
             .Attr("dilations", c.dilations)
             .Build();
  p.output = "c/" + out + "_0";
  return p;
}

std::vector<double> RunWith(CpuKernelLibrary library, PassOp p) {
  SetCpuKernelLibrary(library);
  TensorMap out = MustRun(p.op, &p.env);
  SetCpuKernelLibrary(CpuKernelLibrary::kOneDnn);
  return ToDoubles(out.at(p.output));
}

std::string Describe(const Case& c, onednn::ConvPass pass) {
  return "pass " + std::to_string(static_cast<int>(pass)) + " x " + c.x.ToString() + " weight " +
         c.weight.ToString();
}

const onednn::ConvPass kPasses[] = {onednn::ConvPass::kForward, onednn::ConvPass::kBackwardData,
                                    onednn::ConvPass::kBackwardWeights};

TEST(Conv2dOneDnnTest, EveryPassMatchesTheReferenceKernels) {
  if (!onednn::Available()) GTEST_SKIP() << onednn::Description();
  for (const Case& c : Cases()) {
    for (onednn::ConvPass pass : kPasses) {
      const PassOp p = MakePass(c, pass, 7);
      PassOp copy = MakePass(c, pass, 7);
      const int64_t built = onednn::ConvPrimitivesBuilt();
      const std::vector<double> got = RunWith(CpuKernelLibrary::kOneDnn, std::move(copy));
      ASSERT_GT(onednn::ConvPrimitivesBuilt(), built) << "oneDNN not used: " << Describe(c, pass);
      const std::vector<double> expected = RunWith(CpuKernelLibrary::kReference, MakePass(c, pass, 7));
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], expected[i], kTolerance * std::max(1.0, std::fabs(expected[i])))
            << Describe(c, pass) << " element " << i;
      }
    }
  }
}

TEST(Conv2dOneDnnTest, TheReferenceSelectionBypassesOneDnn) {
  const int64_t built = onednn::ConvPrimitivesBuilt();
  RunWith(CpuKernelLibrary::kReference, MakePass(Cases()[1], onednn::ConvPass::kForward, 1));
  EXPECT_EQ(onednn::ConvPrimitivesBuilt(), built);
}

// One kernel object, many calls: the planned batch's primitive is built
// once (in Init); a smaller dynamic batch gets one more, also reused.
TEST(Conv2dOneDnnTest, PrimitivesAreBuiltOncePerKernelAndBatch) {
  if (!onednn::Available()) GTEST_SKIP() << onednn::Description();
  const Case c = Cases()[1];
  for (onednn::ConvPass pass : kPasses) {
    PassOp planned = MakePass(c, pass, 3);
    CpuDeviceContext cpu;
    KernelInitContext init;
    init.op = &planned.op;
    for (const auto& [arg, lbn] : std::vector<std::pair<std::string, std::string>>{
             {"x", "in/x_0"}, {"weight", "in/weight_0"}, {"dy", "in/dy_0"}, {"like", "in/like_0"}}) {
      if (planned.env.count(lbn)) init.inputs[arg] = {planned.env.at(lbn).desc()};
    }
    init.device = &cpu;
    const int64_t before = onednn::ConvPrimitivesBuilt();
    StatusOr<std::unique_ptr<Kernel>> kernel = CreateAndInitKernel(init, DEVICE_CPU, DT_FLOAT);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(onednn::ConvPrimitivesBuilt(), before + 1) << Describe(c, pass);
    for (int64_t batch : {c.x.dim(0), int64_t{1}, c.x.dim(0), int64_t{1}}) {
      Case small = c;
      small.x.mutable_dim(0) = batch;
      PassOp p = MakePass(small, pass, 40 + batch);
      const std::vector<double> expected = RunWith(CpuKernelLibrary::kReference, MakePass(small, pass, 40 + batch));
      const std::string arg = p.output.substr(2, p.output.size() - 4);
      const Shape out_shape = pass == onednn::ConvPass::kForward        ? OutShape(small)
                              : pass == onednn::ConvPass::kBackwardData ? small.x
                                                                        : small.weight;
      HostTensor out(TensorDesc(out_shape, DT_FLOAT));
      std::vector<Blob> blobs;
      blobs.reserve(4);
      KernelContext ctx(planned.op, &cpu, 0);
      for (const auto& [name, lbn] : std::vector<std::pair<std::string, std::string>>{
               {"x", "in/x_0"}, {"weight", "in/weight_0"}, {"dy", "in/dy_0"}, {"like", "in/like_0"}}) {
        if (!p.env.count(lbn)) continue;
        blobs.push_back(p.env.at(lbn).AsBlob());
        ctx.BindInput(name, &blobs.back());
      }
      Blob out_blob = out.AsBlob();
      ctx.BindOutput(arg, &out_blob);
      Status status = (*kernel)->Forward(&ctx);
      ASSERT_TRUE(status.ok()) << status;
      ExpectAllNear(out, expected, kTolerance, Describe(small, pass));
    }
    EXPECT_EQ(onednn::ConvPrimitivesBuilt(), before + 2) << Describe(c, pass);
  }
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
