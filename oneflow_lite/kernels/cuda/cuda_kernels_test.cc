// Every CUDA kernel against its CPU kernel on fresh random inputs.
//
// Each case builds one op, draws inputs from a seed taken from the clock (it
// is printed on failure, and OFLITE_TEST_SEED fixes it), runs the CPU kernel
// through RunOp, then runs the CUDA kernel on device copies of the same
// inputs with every output poisoned first (NaN for floats, 0xFF bytes
// otherwise), and compares outputs and in-place-updated inputs:
// ||gpu - cpu|| / ||cpu|| below 1e-5 for element-wise ops, 1e-4 for
// reductions and GEMM-like ops; integer and mask outputs exactly.
// Without a GPU every test reports itself skipped.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/device/cuda/cuda_device_context.h"
#include "oneflow_lite/device/cuda/fill.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

constexpr double kElementwise = 1e-5;
constexpr double kReduction = 1e-4;

uint64_t FreshSeed() {
  if (const char* fixed = std::getenv("OFLITE_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

double ToDouble(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT: return t.data<float>()[i];
    case DT_DOUBLE: return t.data<double>()[i];
    case DT_INT32: return t.data<int32_t>()[i];
    case DT_INT64: return static_cast<double>(t.data<int64_t>()[i]);
    default: return static_cast<const uint8_t*>(t.raw())[i];
  }
}

// "" if `got` matches `want`, else a description. Tolerance 0 asks for
// exact equality (integer outputs, masks, index ops): any difference fails;
// otherwise the relative error must stay below the tolerance.
std::string Compare(const HostTensor& got, const HostTensor& want, double tolerance) {
  if (got.desc() != want.desc()) return "desc " + got.desc().ToString() + " vs " + want.desc().ToString();
  const bool floating = want.dtype() == DT_FLOAT || want.dtype() == DT_DOUBLE;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < want.elem_count(); ++i) {
    const double g = ToDouble(got, i), w = ToDouble(want, i);
    if ((!floating || tolerance == 0) && g != w && !(std::isnan(g) && std::isnan(w))) {
      return "element " + std::to_string(i) + ": " + std::to_string(g) + " vs " + std::to_string(w);
    }
    if (floating && (std::isnan(g) != std::isnan(w))) {
      return "element " + std::to_string(i) + " NaN mismatch: " + std::to_string(g) + " vs " +
             std::to_string(w);
    }
    if (std::isnan(w)) continue;
    diff += (g - w) * (g - w);
    norm += w * w;
  }
  const double relative = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  if (tolerance == 0) return "";  // every element compared exactly above
  if (!(relative < tolerance)) {
    return "relative error " + std::to_string(relative) + " >= " + std::to_string(tolerance);
  }
  return "";
}

class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
    auto ctx = CudaDeviceContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    cuda_ = std::move(*ctx);
    seed_ = FreshSeed();
  }
  void TearDown() override {
    for (void* p : allocations_) cudaFree(p);
  }

  // Random input for `lbn` with values in [lo, hi).
  void AddInput(const std::string& lbn, const Shape& shape, DataType dtype = DT_FLOAT,
                double lo = -1.0, double hi = 1.0) {
    env_[lbn] = RandomTensor(TensorDesc(shape, dtype), seed_ + 7919 * (env_.size() + 1), lo, hi);
  }
  void SetInput(const std::string& lbn, HostTensor tensor) { env_[lbn] = std::move(tensor); }

  void* DeviceCopy(const HostTensor& t) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, t.ByteSize() > 0 ? t.ByteSize() : 1), cudaSuccess);
    allocations_.push_back(p);
    if (t.ByteSize() > 0) {
      // On the kernels' own (non-blocking) stream, finished before return: a
      // pageable cudaMemcpy on the legacy stream is not ordered before work
      // on a non-blocking stream.
      EXPECT_EQ(cudaMemcpyAsync(p, t.raw(), t.ByteSize(), cudaMemcpyHostToDevice, cuda_->stream()),
                cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(cuda_->stream()), cudaSuccess);
    }
    return p;
  }

  HostTensor HostCopy(const void* device, const TensorDesc& desc) {
    HostTensor t(desc);
    if (t.ByteSize() > 0) {
      EXPECT_EQ(cudaMemcpyAsync(t.raw(), device, t.ByteSize(), cudaMemcpyDeviceToHost,
                                cuda_->stream()),
                cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(cuda_->stream()), cudaSuccess);
    }
    return t;
  }

  // Runs `op` on the CPU and on the GPU and compares every output and every
  // in-place input (calls > 1: only runs, leaving the status in last_status_).
  void Check(const OpConf& op, double tolerance, RunOpOptions options = {}, int calls = 1) {
    SCOPED_TRACE("op " + op.op_type() + ", seed " + std::to_string(seed_));
    TensorMap cpu_env;
    for (auto& [lbn, t] : env_) cpu_env[lbn] = t.Clone();
    auto cpu_out = RunOp(op, &cpu_env, options);
    ASSERT_TRUE(cpu_out.ok()) << cpu_out.status();

    auto def = LookupOpDef(op.op_type(), op.name());
    ASSERT_TRUE(def.ok()) << def.status();
    KernelInitContext init;
    init.op = &op;
    std::map<std::string, void*> device;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        init.inputs[arg.name()].push_back(env_.at(lbn).desc());
        device[lbn] = DeviceCopy(env_.at(lbn));
      }
    }
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) {
        init.outputs[arg.name()].push_back(cpu_out->at(lbn).desc());
      }
    }
    init.parallel_id = options.parallel_id;
    init.parallel_num = options.parallel_num;
    init.seed = options.seed;
    init.device = cuda_.get();
    DataType dtype = options.dtype;
    if (dtype == DT_INVALID) {
      dtype = op.input_size() > 0 ? env_.at(op.input(0).lbn(0)).dtype()
                                  : init.outputs.begin()->second.at(0).dtype;
    }
    auto kernel = CreateAndInitKernel(init, DEVICE_CUDA, dtype);
    ASSERT_TRUE(kernel.ok()) << kernel.status();

    std::deque<Blob> blobs;  // stable addresses: the context keeps pointers
    KernelContext ctx(op, cuda_.get(), options.iteration);
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        blobs.emplace_back(device[lbn], env_.at(lbn).desc());
        ctx.BindInput(arg.name(), &blobs.back());
      }
    }
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) {
        const TensorDesc& desc = cpu_out->at(lbn).desc();
        void* p = nullptr;
        ASSERT_EQ(cudaMalloc(&p, desc.ByteSize() > 0 ? desc.ByteSize() : 1), cudaSuccess);
        allocations_.push_back(p);
        if (desc.dtype == DT_FLOAT) {
          ASSERT_EQ(LaunchFill(static_cast<float*>(p), desc.shape.elem_count(), std::nanf(""),
                               cuda_->stream()),
                    cudaSuccess);
        } else {
          ASSERT_EQ(cudaMemsetAsync(p, 0xFF, desc.ByteSize(), cuda_->stream()), cudaSuccess);
        }
        device[lbn] = p;
        blobs.emplace_back(p, desc);
        ctx.BindOutput(arg.name(), &blobs.back());
      }
    }
    for (int call = 0; call < calls; ++call) {
      last_status_ = (*kernel)->Forward(&ctx);
      ASSERT_TRUE(cuda_->Synchronize().ok());
    }
    if (calls == 1) {
      ASSERT_TRUE(last_status_.ok()) << last_status_;
    }
    if (calls != 1) return;

    for (const auto& [lbn, want] : *cpu_out) {
      EXPECT_EQ(Compare(HostCopy(device[lbn], want.desc()), want, tolerance), "") << "output " << lbn;
    }
    for (const ArgProto& arg : op.input()) {
      bool is_mutable = false;
      for (const std::string& m : (*def)->mutable_inputs) is_mutable |= m == arg.name();
      if (!is_mutable) continue;
      for (const std::string& lbn : arg.lbn()) {
        const HostTensor& want = cpu_env.at(lbn);
        EXPECT_EQ(Compare(HostCopy(device[lbn], want.desc()), want, tolerance), "")
            << "in-place input " << lbn;
      }
    }
  }

  std::unique_ptr<CudaDeviceContext> cuda_;
  uint64_t seed_ = 0;
  TensorMap env_;
  std::vector<void*> allocations_;
  Status last_status_;
};

OpConf Unary(const std::string& type, const char* in = "x", const char* out = "y") {
  return OpConfBuilder(type, "op").Input(in, "a/out_0").Output(out).Build();
}

// ---- math ------------------------------------------------------------------

TEST_F(CudaKernelTest, Activations) {
  for (const Shape& shape : {Shape({37, 129}), Shape({1}), Shape({0, 3})}) {
    env_.clear();
    AddInput("a/out_0", shape, DT_FLOAT, -3.0, 3.0);
    for (const char* type : {"relu", "sigmoid", "tanh", "gelu"}) Check(Unary(type), kElementwise);
  }
}

TEST_F(CudaKernelTest, ScalarOps) {
  AddInput("a/out_0", Shape({51, 7}), DT_FLOAT, 0.1, 2.0);
  Check(OpConfBuilder("scalar_add", "op").Input("in", "a/out_0").Output("out").Attr("value", 1.5).Build(),
        kElementwise);
  Check(OpConfBuilder("scalar_mul", "op").Input("in", "a/out_0").Output("out").Attr("value", -0.75).Build(),
        kElementwise);
  Check(OpConfBuilder("scalar_pow", "op").Input("in", "a/out_0").Output("out").Attr("exponent", 2.5).Build(),
        kElementwise);
  for (const Shape& shape : {Shape({}), Shape({33, 5}), Shape({0, 3})}) {
    Check(OpConfBuilder("constant", "op").Output("out").Attr("shape", shape).Attr("value", -0.3).Build(),
          kElementwise);
  }
}

TEST_F(CudaKernelTest, ActivationGrads) {
  AddInput("dy/out_0", Shape({33, 65}));
  AddInput("s/out_0", Shape({33, 65}), DT_FLOAT, -2.0, 2.0);
  for (const char* type : {"relu_grad", "sigmoid_grad", "tanh_grad", "gelu_grad"}) {
    const char* saved = std::string(type) == "gelu_grad" ? "x" : "y";
    Check(OpConfBuilder(type, "op").Input("dy", "dy/out_0").Input(saved, "s/out_0").Output("dx").Build(),
          kElementwise);
  }
}

TEST_F(CudaKernelTest, BroadcastBinary) {
  AddInput("x/out_0", Shape({4, 1, 6}));
  AddInput("y/out_0", Shape({5, 1}), DT_FLOAT, 0.5, 1.5);
  for (const char* type : {"broadcast_add", "sub", "mul", "div"}) {
    Check(OpConfBuilder(type, "op").Input("x", "x/out_0").Input("y", "y/out_0").Output("out").Build(),
          kElementwise);
  }
  // broadcast_add as a GPT uses it: [B, T, C] + [T, C] and + [C].
  AddInput("h/out_0", Shape({3, 5, 7}));
  AddInput("pos/out_0", Shape({5, 7}));
  AddInput("bias/out_0", Shape({7}));
  for (const char* y : {"pos/out_0", "bias/out_0"}) {
    Check(OpConfBuilder("broadcast_add", "op").Input("x", "h/out_0").Input("y", y).Output("out")
              .Build(),
          kElementwise);
  }
}

TEST_F(CudaKernelTest, BiasAddAndAdd) {
  AddInput("a/out_0", Shape({33, 17}));
  AddInput("b/out_0", Shape({17}));
  AddInput("c/out_0", Shape({33, 17}));
  AddInput("d/out_0", Shape({33, 17}));
  AddInput("e/out_0", Shape({33}));
  Check(OpConfBuilder("bias_add", "op").Input("a", "a/out_0").Input("b", "b/out_0").Output("out").Build(),
        kElementwise);
  Check(OpConfBuilder("bias_add", "op").Input("a", "a/out_0").Input("b", "e/out_0").Output("out")
            .Attr("axis", int64_t{0}).Build(),
        kElementwise);
  // The fused bias_add_relu (inputs around 0: both sides of the relu).
  Check(OpConfBuilder("bias_add_relu", "op").Input("a", "a/out_0").Input("b", "b/out_0")
            .Output("y").Build(),
        kElementwise);
  Check(OpConfBuilder("bias_add_relu", "op").Input("a", "a/out_0").Input("b", "e/out_0")
            .Output("y").Attr("axis", int64_t{0}).Build(),
        kElementwise);
  // A convolution's bias: axis 1 of a 4-d tensor (elements after it: 63).
  AddInput("f/out_0", Shape({5, 6, 7, 9}));
  AddInput("g/out_0", Shape({6}));
  Check(OpConfBuilder("bias_add", "op").Input("a", "f/out_0").Input("b", "g/out_0").Output("out")
            .Attr("axis", int64_t{1}).Build(),
        kElementwise);
  Check(OpConfBuilder("bias_add_relu", "op").Input("a", "f/out_0").Input("b", "g/out_0")
            .Output("y").Attr("axis", int64_t{1}).Build(),
        kElementwise);
  Check(OpConfBuilder("add", "op").Input("in", std::vector<std::string>{"a/out_0", "c/out_0", "d/out_0"})
            .Output("out").Build(),
        kElementwise);
  Check(OpConfBuilder("add", "op").Input("in", std::vector<std::string>{"a/out_0"}).Output("out").Build(),
        kElementwise);
}

TEST_F(CudaKernelTest, Reductions) {
  AddInput("a/out_0", Shape({6, 7, 9}));
  for (const char* type : {"reduce_sum", "reduce_mean"}) {
    Check(OpConfBuilder(type, "op").Input("x", "a/out_0").Output("y").Attr("axis", std::vector<int64_t>{1}).Build(),
          kReduction);
    Check(OpConfBuilder(type, "op").Input("x", "a/out_0").Output("y")
              .Attr("axis", std::vector<int64_t>{0, -1}).Attr("keepdims", true).Build(),
          kReduction);
    Check(OpConfBuilder(type, "op").Input("x", "a/out_0").Output("y").Build(), kReduction);
  }
  env_.clear();
  AddInput("a/out_0", Shape({1024, 256}));
  Check(OpConfBuilder("reduce_sum", "op").Input("x", "a/out_0").Output("y").Attr("axis", std::vector<int64_t>{0}).Build(),
        kReduction);
  // Few outputs with long sums take the split path (partial sums over many
  // blocks, math_launch.h): a convolution's bias gradient (6 outputs of
  // 50176 terms over non-adjacent axes) and a column sum of 20000 rows.
  // reduce_launch_test checks both paths exactly on integer sums.
  setenv("OFLITE_CUDA_REDUCE_SPLIT", "1", /*overwrite=*/1);
  env_.clear();
  AddInput("c/out_0", Shape({64, 6, 28, 28}), DT_FLOAT, 0.0, 1.0);
  AddInput("r/out_0", Shape({20000, 3}), DT_FLOAT, 0.0, 1.0);
  for (const char* type : {"reduce_sum", "reduce_mean"}) {
    Check(OpConfBuilder(type, "op").Input("x", "c/out_0").Output("y")
              .Attr("axis", std::vector<int64_t>{0, 2, 3}).Build(),
          kReduction);
    Check(OpConfBuilder(type, "op").Input("x", "r/out_0").Output("y")
              .Attr("axis", std::vector<int64_t>{0}).Build(),
          kReduction);
  }
  unsetenv("OFLITE_CUDA_REDUCE_SPLIT");
}

TEST_F(CudaKernelTest, BroadcastLike) {
  AddInput("x/out_0", Shape({7}));
  AddInput("l/out_0", Shape({5, 7}));
  Check(OpConfBuilder("broadcast_like", "op").Input("x", "x/out_0").Input("like", "l/out_0").Output("y")
            .Attr("axis", std::vector<int64_t>{0}).Build(),
        kElementwise);
  env_.clear();
  AddInput("x/out_0", Shape({5, 1}));
  AddInput("l/out_0", Shape({5, 7}));
  Check(OpConfBuilder("broadcast_like", "op").Input("x", "x/out_0").Input("like", "l/out_0").Output("y")
            .Attr("axis", std::vector<int64_t>{1}).Build(),
        kElementwise);
}

TEST_F(CudaKernelTest, LayoutOps) {
  AddInput("a/out_0", Shape({3, 4, 5}));
  AddInput("l/out_0", Shape({12, 5}));
  AddInput("i/out_0", Shape({3, 4, 5}), DT_INT64, -100, 100);
  Check(OpConfBuilder("reshape", "op").Input("x", "a/out_0").Output("y").Attr("shape", Shape({5, -1})).Build(),
        kElementwise);
  Check(OpConfBuilder("reshape_like", "op").Input("x", "a/out_0").Input("like", "l/out_0").Output("y").Build(),
        kElementwise);
  Check(OpConfBuilder("flatten", "op").Input("x", "a/out_0").Output("y").Build(), kElementwise);
  Check(OpConfBuilder("identity", "op").Input("in", "a/out_0").Output("out").Build(), kElementwise);
  Check(OpConfBuilder("zeros_like", "op").Input("like", "a/out_0").Output("out").Build(), kElementwise);
  for (const char* in : {"a/out_0", "i/out_0"}) {
    Check(OpConfBuilder("transpose", "op").Input("x", in).Output("y")
              .Attr("perm", std::vector<int64_t>{2, 0, 1}).Build(),
          kElementwise);
  }
}

TEST_F(CudaKernelTest, ConcatAndSlice) {
  AddInput("a/out_0", Shape({2, 3, 4}));
  AddInput("b/out_0", Shape({2, 5, 4}));
  AddInput("c/out_0", Shape({2, 1, 4}));
  Check(OpConfBuilder("concat", "op").Input("in", std::vector<std::string>{"a/out_0", "b/out_0", "c/out_0"})
            .Output("out").Attr("axis", int64_t{-2}).Build(),
        kElementwise);
  env_.clear();
  AddInput("x/out_0", Shape({7, 9}));
  const OpConf slice = OpConfBuilder("slice", "op").Input("x", "x/out_0").Output("y")
                           .Attr("start", std::vector<int64_t>{1, -7})
                           .Attr("stop", std::vector<int64_t>{6, 9})
                           .Attr("step", std::vector<int64_t>{2, 3}).Build();
  Check(slice, kElementwise);
  AddInput("dy/out_0", Shape({3, 3}));
  Check(OpConfBuilder("slice_grad", "op").Input("dy", "dy/out_0").Input("like", "x/out_0").Output("dx")
            .Attr("start", std::vector<int64_t>{1, -7})
            .Attr("stop", std::vector<int64_t>{6, 9})
            .Attr("step", std::vector<int64_t>{2, 3}).Build(),
        kElementwise);
}

TEST_F(CudaKernelTest, Cast) {
  AddInput("a/out_0", Shape({17, 3}), DT_FLOAT, -50.0, 50.0);
  AddInput("i/out_0", Shape({17, 3}), DT_INT32, -50, 50);
  Check(OpConfBuilder("cast", "op").Input("in", "a/out_0").Output("out").Attr("dtype", DT_INT32).Build(),
        kElementwise);
  Check(OpConfBuilder("cast", "op").Input("in", "a/out_0").Output("out").Attr("dtype", DT_DOUBLE).Build(),
        kElementwise);
  Check(OpConfBuilder("cast", "op").Input("in", "i/out_0").Output("out").Attr("dtype", DT_FLOAT).Build(),
        kElementwise);
}

TEST_F(CudaKernelTest, Matmul) {
  const int64_t m = 33, k = 65, n = 17;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      env_.clear();
      AddInput("a/out_0", ta ? Shape({k, m}) : Shape({m, k}));
      AddInput("b/out_0", tb ? Shape({n, k}) : Shape({k, n}));
      Check(OpConfBuilder("matmul", "op").Input("a", "a/out_0").Input("b", "b/out_0").Output("out")
                .Attr("transpose_a", ta).Attr("transpose_b", tb).Attr("alpha", 0.5).Build(),
            kReduction);
    }
  }
  env_.clear();
  AddInput("a/out_0", Shape({1024, 784}));
  AddInput("b/out_0", Shape({784, 256}));
  Check(OpConfBuilder("matmul", "op").Input("a", "a/out_0").Input("b", "b/out_0").Output("out").Build(),
        kReduction);
}

// Rank >= 2: the Linear fold, strided batches with broadcast (stride 0),
// batch axes that need a loop of strided calls, and sum_batch (one GEMM
// over the folded batch, or a loop accumulating into out).
TEST_F(CudaKernelTest, BatchedMatmul) {
  struct Case {
    Shape a, b;
    bool ta, tb, sum_batch;
  };
  for (const Case& c : std::vector<Case>{
           {Shape({4, 9, 33, 17}), Shape({17, 13}), false, false, false},
           {Shape({4, 9, 33, 17}), Shape({13, 17}), false, true, false},
           {Shape({6, 17, 33}), Shape({6, 13, 17}), true, true, false},
           {Shape({4, 3, 33, 17}), Shape({1, 3, 17, 13}), false, false, false},
           {Shape({4, 1, 33, 17}), Shape({3, 17, 13}), false, false, false},
           {Shape({33, 17}), Shape({5, 17, 13}), false, false, false},
           {Shape({4, 3, 33, 17}), Shape({4, 3, 33, 13}), true, false, true},
           {Shape({4, 3, 33, 17}), Shape({4, 3, 13, 17}), false, true, true},
           {Shape({0, 33, 17}), Shape({17, 13}), false, false, false},
       }) {
    env_.clear();
    AddInput("a/out_0", c.a);
    AddInput("b/out_0", c.b);
    OpConfBuilder builder("matmul", "op");
    builder.Input("a", "a/out_0").Input("b", "b/out_0").Output("out")
        .Attr("transpose_a", c.ta).Attr("transpose_b", c.tb).Attr("alpha", 0.5);
    if (c.sum_batch) builder.Attr("sum_batch", true);
    Check(builder.Build(), kReduction);
  }
}

// ---- nn --------------------------------------------------------------------

TEST_F(CudaKernelTest, Softmax) {
  for (const Shape& shape : {Shape({13, 10}), Shape({3, 5, 4}), Shape({2, 1000})}) {
    env_.clear();
    AddInput("a/out_0", shape, DT_FLOAT, -4.0, 4.0);
    AddInput("dy/out_0", shape);
    const int64_t axis = shape.rank() == 3 ? 1 : -1;
    for (const char* type : {"softmax", "log_softmax"}) {
      Check(OpConfBuilder(type, "op").Input("x", "a/out_0").Output("y").Attr("axis", axis).Build(),
            kReduction);
    }
    AddInput("y/out_0", shape, DT_FLOAT, 0.0, 1.0);
    for (const char* type : {"softmax_grad", "log_softmax_grad"}) {
      Check(OpConfBuilder(type, "op").Input("dy", "dy/out_0").Input("y", "y/out_0").Output("dx")
                .Attr("axis", axis).Build(),
            kReduction);
    }
  }
}

TEST_F(CudaKernelTest, CausalSoftmaxAndGrad) {
  for (const Shape& shape : {Shape({3, 5, 5}), Shape({2, 1, 7}), Shape({0, 4, 4}),
                             Shape({2, 3, 33, 300}), Shape({5, 3})}) {
    env_.clear();
    AddInput("a/out_0", shape, DT_FLOAT, -4.0, 4.0);
    AddInput("dy/out_0", shape);
    AddInput("y/out_0", shape, DT_FLOAT, 0.0, 1.0);
    Check(OpConfBuilder("causal_softmax", "op").Input("x", "a/out_0").Output("y")
              .Attr("scale", 0.3).Build(), kReduction);
    Check(OpConfBuilder("causal_softmax_grad", "op").Input("dy", "dy/out_0").Input("y", "y/out_0")
              .Output("dx").Attr("scale", 0.3).Build(), kReduction);
  }
}

TEST_F(CudaKernelTest, GeluTanhAndGrad) {
  AddInput("x/out_0", Shape({37, 129}), DT_FLOAT, -6.0, 6.0);
  AddInput("dy/out_0", Shape({37, 129}));
  Check(OpConfBuilder("gelu", "op").Input("x", "x/out_0").Output("y").Attr("approximate", "tanh")
            .Build(), kElementwise);
  Check(OpConfBuilder("gelu_grad", "op").Input("dy", "dy/out_0").Input("x", "x/out_0").Output("dx")
            .Attr("approximate", "tanh").Build(), kElementwise);
}

TEST_F(CudaKernelTest, IotaAndComparisons) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
    env_.clear();
    AddInput("x/out_0", Shape({7, 1, 5}), dtype, 0.0, 3.0);
    AddInput("y/out_0", Shape({3, 5}), dtype, 0.0, 3.0);
    for (const char* type : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}) {
      Check(OpConfBuilder(type, "op").Input("x", "x/out_0").Input("y", "y/out_0").Output("out")
                .Build(), 0.0);
    }
    for (int64_t axis : {0, 1, -1}) {
      Check(OpConfBuilder("iota", "op").Input("like", "x/out_0").Output("out").Attr("axis", axis)
                .Attr("dtype", dtype).Build(), 0.0);
    }
  }
}

TEST_F(CudaKernelTest, SparseCrossEntropy) {
  for (DataType label_type : {DT_INT32, DT_INT64}) {
    env_.clear();
    AddInput("p/out_0", Shape({64, 10}), DT_FLOAT, -3.0, 3.0);
    AddInput("l/out_0", Shape({64}), label_type, 0, 10);
    Check(OpConfBuilder("sparse_softmax_cross_entropy", "op").Input("prediction", "p/out_0")
              .Input("label", "l/out_0").Output("prob").Output("out").Build(),
          kReduction);
    AddInput("dy/out_0", Shape({64}));
    AddInput("prob/out_0", Shape({64, 10}), DT_FLOAT, 0.0, 1.0);
    AddInput("dprob/out_0", Shape({64, 10}));
    Check(OpConfBuilder("sparse_softmax_cross_entropy_grad", "op").Input("dy", "dy/out_0")
              .Input("prob", "prob/out_0").Input("label", "l/out_0").Output("dx").Build(),
          kReduction);
    Check(OpConfBuilder("sparse_softmax_cross_entropy_grad", "op").Input("dy", "dy/out_0")
              .Input("prob", "prob/out_0").Input("label", "l/out_0").Input("dprob", "dprob/out_0")
              .Output("dx").Build(),
          kReduction);
  }
}

// [B, T, V] logits with [B, T] targets: the same [rows, C] kernels.
TEST_F(CudaKernelTest, SparseCrossEntropyOverSequences) {
  AddInput("p/out_0", Shape({3, 5, 65}), DT_FLOAT, -3.0, 3.0);
  AddInput("l/out_0", Shape({3, 5}), DT_INT64, 0, 65);
  Check(OpConfBuilder("sparse_softmax_cross_entropy", "op").Input("prediction", "p/out_0")
            .Input("label", "l/out_0").Output("prob").Output("out").Build(),
        kReduction);
  AddInput("dy/out_0", Shape({3, 5}));
  AddInput("prob/out_0", Shape({3, 5, 65}), DT_FLOAT, 0.0, 1.0);
  AddInput("dprob/out_0", Shape({3, 5, 65}));
  Check(OpConfBuilder("sparse_softmax_cross_entropy_grad", "op").Input("dy", "dy/out_0")
            .Input("prob", "prob/out_0").Input("label", "l/out_0").Input("dprob", "dprob/out_0")
            .Output("dx").Build(),
        kReduction);
}

TEST_F(CudaKernelTest, BadLabelIsReportedByTheNextCall) {
  AddInput("p/out_0", Shape({4, 3}));
  SetInput("l/out_0", HostTensor::FromVector<int32_t>(Shape({4}), {0, 2, 7, 1}));
  const OpConf op = OpConfBuilder("sparse_softmax_cross_entropy", "xent").Input("prediction", "p/out_0")
                        .Input("label", "l/out_0").Output("prob").Output("out").Build();
  // The CPU kernel rejects the label at once; RunOp fails, so drive the GPU
  // kernel directly through Check's binding with two calls.
  auto cpu = RunOp(op, &env_);
  ASSERT_FALSE(cpu.ok());
  KernelInitContext init;
  init.op = &op;
  init.device = cuda_.get();
  init.inputs["prediction"].push_back(env_.at("p/out_0").desc());
  init.inputs["label"].push_back(env_.at("l/out_0").desc());
  auto kernel = CreateAndInitKernel(init, DEVICE_CUDA, DT_FLOAT);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  Blob prediction(DeviceCopy(env_.at("p/out_0")), env_.at("p/out_0").desc());
  Blob label(DeviceCopy(env_.at("l/out_0")), env_.at("l/out_0").desc());
  Blob prob(DeviceCopy(HostTensor(TensorDesc(Shape({4, 3}), DT_FLOAT))), TensorDesc(Shape({4, 3}), DT_FLOAT));
  Blob out(DeviceCopy(HostTensor(TensorDesc(Shape({4}), DT_FLOAT))), TensorDesc(Shape({4}), DT_FLOAT));
  KernelContext ctx(op, cuda_.get(), 5);
  ctx.BindInput("prediction", &prediction);
  ctx.BindInput("label", &label);
  ctx.BindOutput("prob", &prob);
  ctx.BindOutput("out", &out);
  ASSERT_TRUE((*kernel)->Forward(&ctx).ok());
  ASSERT_TRUE(cuda_->Synchronize().ok());
  const Status second = (*kernel)->Forward(&ctx);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.message().find("xent"), std::string::npos) << second;
  EXPECT_NE(second.message().find("position 2"), std::string::npos) << second;
  EXPECT_NE(second.message().find("value 7"), std::string::npos) << second;

  // The same label in the last call (nothing calls Forward again): the
  // end-of-run report, once the stream finished, names it, then is clear.
  ASSERT_TRUE((*kernel)->ReportDeferredErrors(ctx).ok());
  ASSERT_TRUE((*kernel)->Forward(&ctx).ok());
  ASSERT_TRUE(cuda_->Synchronize().ok());
  const Status last = (*kernel)->ReportDeferredErrors(ctx);
  ASSERT_FALSE(last.ok());
  EXPECT_NE(last.message().find("xent"), std::string::npos) << last;
  EXPECT_NE(last.message().find("label outside [0, classes)"), std::string::npos) << last;
  EXPECT_NE(last.message().find("value 7"), std::string::npos) << last;
  EXPECT_TRUE((*kernel)->ReportDeferredErrors(ctx).ok());
}

// select_rows sets y's shape from the mask's values (read back to the
// host); the rows must equal the CPU kernel's, in order, for runs of kept
// rows, no kept row and every row kept, with int32 and float masks.
// The CPU kernel runs here directly, not through RunOp: RunOp returns each
// output with its inferred desc (the dynamic blob's capacity, [7, 3]) and
// drops the shape the kernel set on the blob.
TEST_F(CudaKernelTest, SelectRowsEqualsTheCpuKernel) {
  const TensorDesc x_desc(Shape({7, 3}), DT_FLOAT);
  const HostTensor x = RandomTensor(x_desc, 11, -1.0, 1.0);
  const std::vector<std::vector<int32_t>> masks = {
      {1, 0, 1, 1, 0, 0, 1}, {0, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 1}};
  for (bool float_mask : {false, true}) {
    for (const std::vector<int32_t>& values : masks) {
      HostTensor mask = HostTensor::FromVector<int32_t>(Shape({7}), values);
      if (float_mask) {
        mask = HostTensor::FromVector<float>(Shape({7}),
                                             std::vector<float>(values.begin(), values.end()));
      }
      const OpConf op = OpConfBuilder("select_rows", "pick").Input("x", "x/out_0")
                            .Input("mask", "m/out_0").Output("y").Build();
      KernelInitContext init;
      init.op = &op;
      init.inputs["x"].push_back(x_desc);
      init.inputs["mask"].push_back(mask.desc());
      init.outputs["y"].push_back(TensorDesc(Shape({7, 3}), DT_FLOAT, /*dynamic=*/true));

      static const CpuDeviceContext* const kCpu = new CpuDeviceContext();
      init.device = kCpu;
      auto cpu_kernel = CreateAndInitKernel(init, DEVICE_CPU, DT_FLOAT);
      ASSERT_TRUE(cpu_kernel.ok()) << cpu_kernel.status();
      HostTensor cpu_x = x.Clone(), cpu_mask = mask.Clone(), cpu_y(x_desc);
      Blob cpu_x_blob = cpu_x.AsBlob(), cpu_mask_blob = cpu_mask.AsBlob(),
           cpu_y_blob = cpu_y.AsBlob();
      KernelContext cpu_ctx(op, kCpu, 0);
      cpu_ctx.BindInput("x", &cpu_x_blob);
      cpu_ctx.BindInput("mask", &cpu_mask_blob);
      cpu_ctx.BindOutput("y", &cpu_y_blob);
      ASSERT_TRUE((*cpu_kernel)->Forward(&cpu_ctx).ok());
      int64_t nonzero = 0;
      for (int32_t v : values) nonzero += v != 0;
      ASSERT_EQ(cpu_y_blob.shape(), Shape({nonzero, 3})) << "CPU kernel, mask " << mask.desc().ToString();
      HostTensor want(TensorDesc(cpu_y_blob.shape(), DT_FLOAT));
      if (want.ByteSize() > 0) std::memcpy(want.raw(), cpu_y.raw(), want.ByteSize());

      init.device = cuda_.get();
      auto kernel = CreateAndInitKernel(init, DEVICE_CUDA, DT_FLOAT);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      Blob x_blob(DeviceCopy(x), x_desc);
      Blob mask_blob(DeviceCopy(mask), mask.desc());
      Blob y_blob(DeviceCopy(HostTensor(x_desc)), x_desc);
      KernelContext ctx(op, cuda_.get(), 0);
      ctx.BindInput("x", &x_blob);
      ctx.BindInput("mask", &mask_blob);
      ctx.BindOutput("y", &y_blob);
      ASSERT_TRUE((*kernel)->Forward(&ctx).ok());
      ASSERT_TRUE(cuda_->Synchronize().ok());
      ASSERT_EQ(y_blob.shape(), want.shape()) << (float_mask ? "float" : "int32") << " mask";
      EXPECT_EQ(Compare(HostCopy(y_blob.raw(), want.desc()), want, 0.0), "");
    }
  }
}

TEST_F(CudaKernelTest, Conv2d) {
  AddInput("x/out_0", Shape({2, 3, 9, 9}));
  AddInput("w/out_0", Shape({4, 3, 3, 3}));
  AddInput("dy/out_0", Shape({2, 4, 5, 5}));
  const std::vector<int64_t> two = {2, 2}, one = {1, 1};
  Check(OpConfBuilder("conv2d", "op").Input("x", "x/out_0").Input("weight", "w/out_0").Output("y")
            .Attr("strides", two).Attr("padding", one).Build(),
        kReduction);
  Check(OpConfBuilder("conv2d_grad_data", "op").Input("dy", "dy/out_0").Input("weight", "w/out_0")
            .Input("like", "x/out_0").Output("dx").Attr("strides", two).Attr("padding", one).Build(),
        kReduction);
  Check(OpConfBuilder("conv2d_grad_filter", "op").Input("dy", "dy/out_0").Input("x", "x/out_0")
            .Input("like", "w/out_0").Output("dw").Attr("strides", two).Attr("padding", one).Build(),
        kReduction);
  // LeNet-5's first layer at batch 256.
  env_.clear();
  AddInput("x/out_0", Shape({256, 1, 28, 28}));
  AddInput("w/out_0", Shape({6, 1, 5, 5}));
  Check(OpConfBuilder("conv2d", "op").Input("x", "x/out_0").Input("weight", "w/out_0").Output("y")
            .Attr("padding", std::vector<int64_t>{2, 2}).Build(),
        kReduction);
}

TEST_F(CudaKernelTest, Pooling) {
  AddInput("x/out_0", Shape({2, 3, 9, 9}));
  AddInput("dy/out_0", Shape({2, 3, 5, 5}));
  const std::vector<int64_t> three = {3, 3}, two = {2, 2}, one = {1, 1};
  for (const char* type : {"max_pool2d", "avg_pool2d"}) {
    Check(OpConfBuilder(type, "op").Input("x", "x/out_0").Output("y").Attr("kernel_size", three)
              .Attr("strides", two).Attr("padding", one).Build(),
          kElementwise);
  }
  Check(OpConfBuilder("avg_pool2d_grad", "op").Input("dy", "dy/out_0").Input("like", "x/out_0")
            .Output("dx").Attr("kernel_size", three).Attr("strides", two).Attr("padding", one).Build(),
        kElementwise);
  // max_pool2d_grad takes y too; only x decides the routing.
  AddInput("y/out_0", Shape({2, 3, 5, 5}));
  Check(OpConfBuilder("max_pool2d_grad", "op").Input("dy", "dy/out_0").Input("x", "x/out_0")
            .Input("y", "y/out_0").Output("dx").Attr("kernel_size", three).Attr("strides", two)
            .Attr("padding", one).Build(),
        kElementwise);
}

TEST_F(CudaKernelTest, LayerNorm) {
  AddInput("x/out_0", Shape({6, 4, 33}));
  AddInput("g/out_0", Shape({33}));
  AddInput("b/out_0", Shape({33}));
  Check(OpConfBuilder("layer_norm", "op").Input("x", "x/out_0").Input("gamma", "g/out_0")
            .Input("beta", "b/out_0").Output("y").Output("mean").Output("inv_variance").Build(),
        kReduction);
  AddInput("dy/out_0", Shape({6, 4, 33}));
  AddInput("m/out_0", Shape({6, 4}), DT_FLOAT, -0.5, 0.5);
  AddInput("iv/out_0", Shape({6, 4}), DT_FLOAT, 0.5, 2.0);
  AddInput("dm/out_0", Shape({6, 4}));
  AddInput("div/out_0", Shape({6, 4}));
  Check(OpConfBuilder("layer_norm_grad", "op").Input("dy", "dy/out_0").Input("x", "x/out_0")
            .Input("mean", "m/out_0").Input("inv_variance", "iv/out_0").Input("gamma", "g/out_0")
            .Input("dmean", "dm/out_0").Input("dinv_variance", "div/out_0")
            .Output("dx").Output("dgamma").Output("dbeta").Build(),
        kReduction);
}

TEST_F(CudaKernelTest, Embedding) {
  AddInput("w/out_0", Shape({11, 5}));
  AddInput("i/out_0", Shape({3, 4}), DT_INT32, 0, 11);
  AddInput("dy/out_0", Shape({3, 4, 5}));
  Check(OpConfBuilder("embedding", "op").Input("weight", "w/out_0").Input("indices", "i/out_0")
            .Output("out").Build(),
        kElementwise);
  Check(OpConfBuilder("embedding_grad", "op").Input("dy", "dy/out_0").Input("indices", "i/out_0")
            .Input("like", "w/out_0").Output("dweight").Build(),
        kReduction);
}

TEST_F(CudaKernelTest, DropoutMatchesTheCpuMaskBitForBit) {
  AddInput("x/out_0", Shape({37, 65}));
  RunOpOptions options;
  options.iteration = 3;
  options.parallel_id = 1;
  options.parallel_num = 2;
  Check(OpConfBuilder("dropout", "op").Input("x", "x/out_0").Output("y").Output("mask")
            .Attr("rate", 0.3).Attr("seed", int64_t{5}).Build(),
        kElementwise, options);
  HostTensor mask(TensorDesc(Shape({37, 65}), DT_UINT8));
  for (int64_t i = 0; i < mask.elem_count(); ++i) {
    static_cast<uint8_t*>(mask.raw())[i] = (i * 7 + seed_) % 3 != 0 ? 1 : 0;
  }
  SetInput("m/out_0", std::move(mask));
  Check(OpConfBuilder("dropout_grad", "op").Input("dy", "x/out_0").Input("mask", "m/out_0")
            .Output("dx").Attr("rate", 0.3).Build(),
        kElementwise);
}

TEST_F(CudaKernelTest, ArgmaxAndAccuracy) {
  AddInput("x/out_0", Shape({9, 10}));
  AddInput("l/out_0", Shape({9}), DT_INT64, 0, 10);
  Check(OpConfBuilder("argmax", "op").Input("x", "x/out_0").Output("y").Build(), kElementwise);
  Check(OpConfBuilder("argmax", "op").Input("x", "x/out_0").Output("y").Attr("axis", int64_t{0}).Build(),
        kElementwise);
  Check(OpConfBuilder("accuracy", "op").Input("prediction", "x/out_0").Input("label", "l/out_0")
            .Output("out").Build(),
        kElementwise);
}

// ---- train -----------------------------------------------------------------

TEST_F(CudaKernelTest, OptimizerUpdates) {
  const Shape shape({257, 3});
  for (const char* arg : {"w/out_0", "g/out_0", "mo/out_0", "m/out_0"}) AddInput(arg, shape);
  AddInput("v/out_0", shape, DT_FLOAT, 0.0, 1.0);
  AddInput("s/out_0", Shape({}), DT_FLOAT, 0.2, 0.9);
  RunOpOptions options;
  options.iteration = 4;
  Check(OpConfBuilder("sgd_update", "op").Input("model", "w/out_0").Input("model_diff", "g/out_0")
            .Input("scale", "s/out_0").Attr("base_lr", 0.1).Attr("weight_decay", 0.01).Build(),
        kElementwise, options);
  Check(OpConfBuilder("momentum_update", "op").Input("model", "w/out_0").Input("model_diff", "g/out_0")
            .Input("momentum", "mo/out_0").Attr("base_lr", 0.1).Attr("beta", 0.8).Build(),
        kElementwise, options);
  for (bool decoupled : {false, true}) {
    Check(OpConfBuilder("adam_update", "op").Input("model", "w/out_0").Input("model_diff", "g/out_0")
              .Input("m", "m/out_0").Input("v", "v/out_0").Input("scale", "s/out_0")
              .Attr("base_lr", 0.01).Attr("weight_decay", 0.1).Attr("decoupled", decoupled).Build(),
          kElementwise, options);
  }
}

TEST_F(CudaKernelTest, ClipScale) {
  AddInput("a/out_0", Shape({300, 7}));
  AddInput("b/out_0", Shape({13}));
  for (double max_norm : {0.5, 1000.0}) {
    Check(OpConfBuilder("clip_scale", "op").Input("in", std::vector<std::string>{"a/out_0", "b/out_0"})
              .Output("out").Attr("max_norm", max_norm).Build(),
          kReduction);
  }
}

// A non-finite global norm must not leave the previous finite scale in
// `out` (the update would then apply it to NaN gradients): the scale becomes
// NaN, which every update kernel treats as "skip this step", and the next
// call reports the error naming the op.
TEST_F(CudaKernelTest, ClipScaleOfANonFiniteNormWritesNaNAndReportsIt) {
  const OpConf op = OpConfBuilder("clip_scale", "clip").Input("in", "a/out_0").Output("out")
                        .Attr("max_norm", 0.5).Build();
  KernelInitContext init;
  init.op = &op;
  init.device = cuda_.get();
  const TensorDesc in_desc(Shape({64}), DT_FLOAT);
  init.inputs["in"].push_back(in_desc);
  init.outputs["out"].push_back(TensorDesc(Shape({1}), DT_FLOAT));
  auto kernel = CreateAndInitKernel(init, DEVICE_CUDA, DT_FLOAT);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  HostTensor finite = HostTensor::FromVector<float>(Shape({64}), std::vector<float>(64, 1.f));
  Blob in(DeviceCopy(finite), in_desc);
  Blob out(DeviceCopy(HostTensor(TensorDesc(Shape({1}), DT_FLOAT))), TensorDesc(Shape({1}), DT_FLOAT));
  KernelContext ctx(op, cuda_.get(), 3);
  ctx.BindInput("in", &in);
  ctx.BindOutput("out", &out);
  ASSERT_TRUE((*kernel)->Forward(&ctx).ok());
  ASSERT_TRUE(cuda_->Synchronize().ok());
  const float scale = HostCopy(out.raw(), out.desc()).data<float>()[0];
  ASSERT_TRUE(std::isfinite(scale) && scale > 0 && scale < 1) << scale;  // 0.5 / 8

  std::vector<float> bad(64, 1.f);
  bad[17] = std::nanf("");
  HostTensor with_nan = HostTensor::FromVector<float>(Shape({64}), bad);
  ASSERT_EQ(cudaMemcpyAsync(in.raw(), with_nan.raw(), with_nan.ByteSize(), cudaMemcpyHostToDevice,
                            cuda_->stream()),
            cudaSuccess);
  ASSERT_TRUE((*kernel)->Forward(&ctx).ok());
  ASSERT_TRUE(cuda_->Synchronize().ok());
  EXPECT_TRUE(std::isnan(HostCopy(out.raw(), out.desc()).data<float>()[0]))
      << "the previous finite scale was kept for a non-finite norm";
  const Status next = (*kernel)->Forward(&ctx);
  ASSERT_FALSE(next.ok());
  EXPECT_NE(next.message().find("clip"), std::string::npos) << next;
}

TEST_F(CudaKernelTest, VariableStartsFromTheCpuValues) {
  for (const char* init : {"normal", "xavier_uniform", "constant"}) {
    Check(OpConfBuilder("variable", "op").Output("out").Attr("shape", Shape({16, 9}))
              .Attr("initializer", init).Attr("seed", int64_t{3}).Build(),
          1e-12);
  }
}

// ---- ops of issue 18 (unary_select_, batch_norm_ and nn_kernels.cc) ----------

TEST_F(CudaKernelTest, UnaryMathOpsAndGradients) {
  for (const Shape& shape : {Shape({0}), Shape({1}), Shape({257, 3})}) {
    env_.clear();
    AddInput("x/out_0", shape, DT_FLOAT, 0.2, 2.0);  // positive: log, sqrt, rsqrt
    AddInput("n/out_0", shape, DT_FLOAT, -2.0, 2.0);
    AddInput("d/out_0", shape);
    for (const char* type : {"exp", "log", "sqrt", "rsqrt", "abs", "neg", "silu"}) {
      const char* x = std::string(type) == "abs" || std::string(type) == "silu" ? "n/out_0" : "x/out_0";
      Check(OpConfBuilder(type, "op").Input("x", x).Output("y").Build(), kElementwise);
    }
    Check(OpConfBuilder("leaky_relu", "op").Input("x", "n/out_0").Output("y").Attr("alpha", 0.2)
              .Build(), kElementwise);
    Check(OpConfBuilder("clamp", "op").Input("x", "n/out_0").Output("y").Attr("min", -0.5)
              .Attr("max", 0.5).Build(), kElementwise);
    Check(OpConfBuilder("clamp", "op").Input("x", "n/out_0").Output("y").Attr("max", 0.5).Build(),
          kElementwise);
    // An attribute of another op (min) must not change the others: it once
    // became leaky_relu_grad's alpha on the GPU.
    for (const char* grad : {"abs_grad", "silu_grad", "leaky_relu_grad", "clamp_grad"}) {
      Check(OpConfBuilder(grad, "op").Input("dy", "d/out_0").Input("x", "n/out_0").Output("dx")
                .Attr("min", -0.5).Build(), kElementwise);
    }
    Check(OpConfBuilder("leaky_relu_grad", "op").Input("dy", "d/out_0").Input("x", "n/out_0")
              .Output("dx").Attr("alpha", 0.2).Build(), kElementwise);
    Check(OpConfBuilder("clamp_grad", "op").Input("dy", "d/out_0").Input("x", "n/out_0")
              .Output("dx").Attr("min", -0.5).Attr("max", 0.25).Build(), kElementwise);
  }
}

TEST_F(CudaKernelTest, MaximumMinimumWhereWithBroadcasting) {
  AddInput("x/out_0", Shape({7, 1, 5}));
  AddInput("y/out_0", Shape({3, 5}));
  AddInput("z/out_0", Shape({7, 3, 5}));
  AddInput("c/out_0", Shape({7, 3, 1}), DT_INT32, 0, 2);
  for (const char* type : {"maximum", "minimum"}) {
    Check(OpConfBuilder(type, "op").Input("x", "x/out_0").Input("y", "y/out_0").Output("out")
              .Build(), kElementwise);
    Check(OpConfBuilder(std::string(type) + "_grad", "op").Input("dz", "z/out_0")
              .Input("x", "x/out_0").Input("y", "y/out_0").Output("dx").Build(), kElementwise);
  }
  Check(OpConfBuilder("where", "op").Input("condition", "c/out_0").Input("x", "x/out_0")
            .Input("y", "y/out_0").Output("out").Build(), kElementwise);
}

TEST_F(CudaKernelTest, BinaryCrossEntropyWithLogits) {
  AddInput("x/out_0", Shape({257, 3}), DT_FLOAT, -8.0, 8.0);
  AddInput("t/out_0", Shape({257, 3}), DT_FLOAT, 0.0, 1.0);
  AddInput("d/out_0", Shape({257, 3}));
  Check(OpConfBuilder("binary_cross_entropy_with_logits", "op").Input("x", "x/out_0")
            .Input("target", "t/out_0").Output("out").Build(), kElementwise);
  Check(OpConfBuilder("binary_cross_entropy_with_logits_grad", "op").Input("dy", "d/out_0")
            .Input("x", "x/out_0").Input("target", "t/out_0").Output("dx").Output("dtarget")
            .Build(), kElementwise);
}

TEST_F(CudaKernelTest, OneHotGatherAndGatherGrad) {
  AddInput("i/out_0", Shape({9, 5}), DT_INT64, 0, 7);
  AddInput("x/out_0", Shape({7, 3, 2}));
  AddInput("d/out_0", Shape({9, 5, 3, 2}));
  Check(OpConfBuilder("one_hot", "op").Input("indices", "i/out_0").Output("out")
            .Attr("depth", int64_t{7}).Attr("on_value", 2.0).Build(), kElementwise);
  Check(OpConfBuilder("gather", "op").Input("x", "x/out_0").Input("indices", "i/out_0")
            .Output("out").Build(), kElementwise);
  Check(OpConfBuilder("gather_grad", "op").Input("dy", "d/out_0").Input("indices", "i/out_0")
            .Input("like", "x/out_0").Output("dx").Build(), kReduction);
}

TEST_F(CudaKernelTest, AdaptiveAvgPoolAndGrad) {
  AddInput("x/out_0", Shape({2, 3, 7, 5}));
  AddInput("d/out_0", Shape({2, 3, 3, 4}));
  Check(OpConfBuilder("adaptive_avg_pool2d", "op").Input("x", "x/out_0").Output("y")
            .Attr("output_size", std::vector<int64_t>{3, 4}).Build(), kReduction);
  Check(OpConfBuilder("adaptive_avg_pool2d_grad", "op").Input("dy", "d/out_0")
            .Input("like", "x/out_0").Output("dx")
            .Attr("output_size", std::vector<int64_t>{3, 4}).Build(), kReduction);
}

TEST_F(CudaKernelTest, BatchNormBothModesAndGrad) {
  AddInput("x/out_0", Shape({9, 5, 3, 7}), DT_FLOAT, -2.0, 3.0);
  AddInput("g/out_0", Shape({5}), DT_FLOAT, 0.5, 1.5);
  AddInput("b/out_0", Shape({5}));
  AddInput("mm/out_0", Shape({5}));
  AddInput("mv/out_0", Shape({5}), DT_FLOAT, 0.5, 2.0);
  AddInput("dy/out_0", Shape({9, 5, 3, 7}));
  AddInput("dm/out_0", Shape({5}));
  AddInput("di/out_0", Shape({5}));
  for (bool training : {true, false}) {
    Check(OpConfBuilder("batch_norm", "op").Input("x", "x/out_0").Input("gamma", "g/out_0")
              .Input("beta", "b/out_0").Input("moving_mean", "mm/out_0")
              .Input("moving_variance", "mv/out_0").Output("y").Output("mean")
              .Output("inv_variance").Attr("training", training).Attr("momentum", 0.8).Build(),
          kReduction);
    Check(OpConfBuilder("batch_norm_grad", "op").Input("dy", "dy/out_0").Input("x", "x/out_0")
              .Input("mean", "mm/out_0").Input("inv_variance", "mv/out_0").Input("gamma", "g/out_0")
              .Input("dmean", "dm/out_0").Input("dinv_variance", "di/out_0").Output("dx")
              .Output("dgamma").Output("dbeta").Attr("training", training).Build(),
          kReduction);
  }
}

}  // namespace
}  // namespace oflite
