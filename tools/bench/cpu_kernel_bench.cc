// cpu_kernel_bench: one CPU kernel call at a time, on 1, 2, ... compute
// threads (cpu_threads, kernels/cpu/cpu_threads.h), at the sizes of the
// CNN, LeNet-5, ResNet and MLP training benchmarks (train_cnn, train_mlp):
// activations and their gradients, bias_add and the bias gradient
// (reduce_sum over the batch and the spatial axes), pooling forward and
// backward, batch_norm (training mode) and its gradient. Each kernel is
// created once and its Forward called repeatedly on the same blobs, so the
// figures are the kernel's own, without the runtime. Samples of the thread
// counts are interleaved (the order rotates every sample) so load drifts
// hit each of them; each figure is the median of --samples samples, a
// sample being as many calls as take --sample_ms.
// Prints wall time per call (median and the fastest sample: on a loaded
// machine the fastest is the nearest to an idle one's) and process CPU time
// per call (it includes OpenMP workers spinning after a region), the
// median speed-up of the last thread count over the first, whether every
// thread count gave the first one's bits, and the load average.
//
//   bazel build -c opt //tools/bench:cpu_kernel_bench
//   bazel-bin/tools/bench/cpu_kernel_bench [--threads 1,2] [--samples 7]
//       [--sample_ms 20] [--filter pool] [--help]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/session/flags.h"
#include "tools/bench/bench_flags.h"

namespace oflite {
namespace {

// After "usage: ... <program>" in --help.
constexpr char kUsage[] =
    "[flags]\n\nTime per call of the CPU kernels of the CNN, LeNet-5, ResNet and MLP "
    "benchmarks\n(activations, bias_add and its gradient, pooling, batch_norm and its gradient) "
    "on each\ncompute thread count.";

struct Case {
  std::string name;  // "<op> <model blob> <shape>"
  OpConf op;
  std::vector<std::pair<std::string, Shape>> inputs;  // lbn, shape (float32)
};

OpConf Unary(const char* type, const char* in, const char* out) {
  return OpConfBuilder(type, "op").Input(in, "in/a_0").Output(out).Build();
}

OpConf ReluGrad() {
  return OpConfBuilder("relu_grad", "op")
      .Input("dy", "in/a_0")
      .Input("y", "in/b_0")
      .Output("dx")
      .Build();
}

OpConf BiasAdd() {
  return OpConfBuilder("bias_add", "op")
      .Input("a", "in/a_0")
      .Input("b", "in/b_0")
      .Output("out")
      .Attr("axis", int64_t{1})
      .Build();
}

OpConf ReduceSum(std::vector<int64_t> axes) {
  return OpConfBuilder("reduce_sum", "op")
      .Input("x", "in/a_0")
      .Output("y")
      .Attr("axis", axes)
      .Build();
}

OpConf Pool(const std::string& type) {
  OpConfBuilder b(type, "op");
  if (type == "max_pool2d" || type == "avg_pool2d") {
    b.Input("x", "in/a_0");
  } else if (type == "max_pool2d_grad") {
    b.Input("dy", "in/b_0").Input("x", "in/a_0").Input("y", "in/c_0");
  } else {
    b.Input("dy", "in/b_0").Input("like", "in/a_0");
  }
  const bool grad = type == "max_pool2d_grad" || type == "avg_pool2d_grad";
  return b.Output(grad ? "dx" : "y")
      .Attr("kernel_size", std::vector<int64_t>{2, 2})
      .Attr("strides", std::vector<int64_t>{2, 2})
      .Attr("padding", std::vector<int64_t>{0, 0})
      .Build();
}

// Training mode, as the ResNet example runs it. The running statistics are
// updated in place on every call (they converge; the timing does not care).
OpConf BatchNorm() {
  return OpConfBuilder("batch_norm", "op")
      .Input("x", "in/a_0")
      .Input("gamma", "in/b_0")
      .Input("beta", "in/c_0")
      .Input("moving_mean", "in/d_0")
      .Input("moving_variance", "in/e_0")
      .Output("y")
      .Output("mean")
      .Output("inv_variance")
      .Build();
}

// Without dmean/dinv_variance, as the ResNet step's gradient runs it.
OpConf BatchNormGrad() {
  return OpConfBuilder("batch_norm_grad", "op")
      .Input("dy", "in/b_0")
      .Input("x", "in/a_0")
      .Input("mean", "in/c_0")
      .Input("inv_variance", "in/d_0")
      .Input("gamma", "in/e_0")
      .Output("dx")
      .Output("dgamma")
      .Output("dbeta")
      .Build();
}

Shape Pooled(const Shape& x) { return Shape({x.dim(0), x.dim(1), x.dim(2) / 2, x.dim(3) / 2}); }

std::vector<Case> Cases() {
  // Blobs of the training benchmarks: LeNet-5 at batch 256 (its example's
  // batch), the CNN at 64 (train_cnn), the MLP's hidden layer at 256.
  const std::vector<std::pair<std::string, Shape>> conv_outputs = {
      {"lenet5.conv1", Shape({256, 6, 28, 28})},
      {"lenet5.conv2", Shape({256, 16, 10, 10})},
      {"cnn.conv1", Shape({64, 16, 28, 28})},
      {"cnn.conv2", Shape({64, 32, 14, 14})},
  };
  const std::pair<std::string, Shape> dense = {"mlp.hidden", Shape({256, 256})};
  std::vector<Case> cases;
  auto label = [](const std::string& op, const std::string& blob, const Shape& s) {
    return op + " " + blob + " " + s.ToString();
  };
  for (const auto& [blob, s] : conv_outputs) {
    cases.push_back({label("relu", blob, s), Unary("relu", "x", "y"), {{"in/a_0", s}}});
  }
  cases.push_back({label("relu", dense.first, dense.second), Unary("relu", "x", "y"),
                   {{"in/a_0", dense.second}}});
  for (const auto& [blob, s] : conv_outputs) {
    cases.push_back({label("relu_grad", blob, s), ReluGrad(), {{"in/a_0", s}, {"in/b_0", s}}});
  }
  cases.push_back({label("relu_grad", dense.first, dense.second), ReluGrad(),
                   {{"in/a_0", dense.second}, {"in/b_0", dense.second}}});
  for (const auto& [blob, s] : conv_outputs) {
    cases.push_back(
        {label("bias_add", blob, s), BiasAdd(), {{"in/a_0", s}, {"in/b_0", Shape({s.dim(1)})}}});
  }
  cases.push_back({label("bias_add", dense.first, dense.second), BiasAdd(),
                   {{"in/a_0", dense.second}, {"in/b_0", Shape({dense.second.dim(1)})}}});
  for (const auto& [blob, s] : conv_outputs) {
    cases.push_back({label("bias_grad", blob, s), ReduceSum({0, 2, 3}), {{"in/a_0", s}}});
  }
  cases.push_back({label("bias_grad", dense.first, dense.second), ReduceSum({0}),
                   {{"in/a_0", dense.second}}});
  for (const auto& [blob, s] : conv_outputs) {
    if (s.dim(2) % 2 != 0) continue;
    cases.push_back({label("max_pool2d", blob, s), Pool("max_pool2d"), {{"in/a_0", s}}});
    cases.push_back({label("max_pool2d_grad", blob, s), Pool("max_pool2d_grad"),
                     {{"in/a_0", s}, {"in/b_0", Pooled(s)}, {"in/c_0", Pooled(s)}}});
    cases.push_back({label("avg_pool2d", blob, s), Pool("avg_pool2d"), {{"in/a_0", s}}});
    cases.push_back({label("avg_pool2d_grad", blob, s), Pool("avg_pool2d_grad"),
                     {{"in/a_0", s}, {"in/b_0", Pooled(s)}}});
  }
  // BatchNorm at the ResNet bench's blobs (batch 128: stem, block 1, block
  // 2) and at CNN-like sizes of batch 64 with more channels.
  const std::vector<std::pair<std::string, Shape>> bn_inputs = {
      {"resnet.stem", Shape({128, 8, 28, 28})},  {"resnet.block1", Shape({128, 8, 14, 14})},
      {"resnet.block2", Shape({128, 16, 7, 7})}, {"b64.c16", Shape({64, 16, 28, 28})},
      {"b64.c32", Shape({64, 32, 14, 14})},      {"b64.c64", Shape({64, 64, 7, 7})},
  };
  for (const auto& [blob, s] : bn_inputs) {
    const Shape channel({s.dim(1)});
    cases.push_back({label("batch_norm", blob, s),
                     BatchNorm(),
                     {{"in/a_0", s},
                      {"in/b_0", channel},
                      {"in/c_0", channel},
                      {"in/d_0", channel},
                      {"in/e_0", channel}}});
    cases.push_back({label("batch_norm_grad", blob, s),
                     BatchNormGrad(),
                     {{"in/a_0", s},
                      {"in/b_0", s},
                      {"in/c_0", channel},
                      {"in/d_0", channel},
                      {"in/e_0", channel}}});
  }
  return cases;
}

HostTensor Random(const Shape& shape, uint64_t seed) {
  HostTensor t(TensorDesc(shape, DT_FLOAT));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.elem_count(); ++i) p[i] = d(rng);
  return t;
}

double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One kernel bound to its blobs once, called again and again.
class BoundKernel {
 public:
  static StatusOr<std::unique_ptr<BoundKernel>> Create(const Case& c) {
    auto bound = std::unique_ptr<BoundKernel>(new BoundKernel(c.op));
    ArgDescs in_descs;
    uint64_t seed = 1;
    for (const auto& [lbn, shape] : c.inputs) bound->tensors_.emplace_back(Random(shape, seed++));
    for (const ArgProto& arg : c.op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        const HostTensor& t = bound->tensors_[bound->InputIndex(c, lbn)];
        in_descs[arg.name()].push_back(t.desc());
      }
    }
    ASSIGN_OR_RETURN(ArgDescs out_descs, InferOp(c.op, in_descs));
    KernelInitContext init;
    init.op = &bound->op_;
    init.inputs = in_descs;
    init.outputs = out_descs;
    init.device = &bound->device_;
    ASSIGN_OR_RETURN(bound->kernel_, CreateAndInitKernel(init, DEVICE_CPU, DT_FLOAT));
    // The context holds pointers to blobs_: it must not grow past this.
    bound->blobs_.reserve(c.inputs.size() + c.op.output_size());
    for (const ArgProto& arg : c.op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        bound->blobs_.push_back(bound->tensors_[bound->InputIndex(c, lbn)].AsBlob());
        bound->ctx_.BindInput(arg.name(), &bound->blobs_.back());
      }
    }
    for (const ArgProto& arg : c.op.output()) {
      bound->tensors_.emplace_back(out_descs.at(arg.name()).at(0));
      bound->outputs_.push_back(bound->tensors_.size() - 1);
      bound->blobs_.push_back(bound->tensors_.back().AsBlob());
      bound->ctx_.BindOutput(arg.name(), &bound->blobs_.back());
    }
    return bound;
  }

  Status Call() { return kernel_->Forward(&ctx_); }
  // Copies of every output (for the same-bits check).
  std::vector<HostTensor> CloneOutputs() const {
    std::vector<HostTensor> copies;
    for (size_t i : outputs_) copies.push_back(tensors_[i].Clone());
    return copies;
  }

 private:
  explicit BoundKernel(const OpConf& op) : op_(op), ctx_(op_, &device_, 0) {}

  size_t InputIndex(const Case& c, const std::string& lbn) const {
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.inputs[i].first == lbn) return i;
    }
    return 0;
  }

  const OpConf op_;
  CpuDeviceContext device_;
  KernelContext ctx_;
  std::unique_ptr<Kernel> kernel_;
  std::vector<HostTensor> tensors_;
  std::vector<Blob> blobs_;
  std::vector<size_t> outputs_;  // indices into tensors_
};

struct Options {
  std::vector<int64_t> threads;
  int samples = 0;
  int64_t sample_ms = 0;
  std::string filter;
};

std::vector<cli::FlagSpec> FlagSpecs() {
  return {{"threads", "compute thread counts (cpu_threads), comma-separated", false, "1,2"},
          {"samples", "samples per figure (their median is printed)", false, "7"},
          {"sample_ms", "the wall time one sample's calls take, about (milliseconds)", false, "20"},
          {"filter", "only the kernels whose name contains this text", false, ""}};
}

StatusOr<Options> ReadOptions(const cli::FlagSet& flags) {
  Options options;
  ASSIGN_OR_RETURN(options.threads, bench::GetIntList(flags, "threads", 1, kMaxCpuThreads));
  ASSIGN_OR_RETURN(options.samples, flags.GetInt("samples", 1, 1000));
  ASSIGN_OR_RETURN(options.sample_ms, flags.GetInt("sample_ms", 1, 60000));
  options.filter = flags.Get("filter");
  return options;
}

int Run(const Options& options) {
  const std::vector<int64_t>& threads = options.threads;
  std::printf("cpu_kernel_bench: float32, median of %d samples of ~%lld ms, threads", options.samples,
              static_cast<long long>(options.sample_ms));
  for (int64_t t : threads) std::printf(" %lld", static_cast<long long>(t));
  std::printf("; %d CPUs available; %s\n", AvailableCpuCores(), CpuComputeDescription().c_str());
  std::printf("%-50s", "kernel blob shape");
  for (int64_t t : threads) {
    std::printf("  %3lldT us  (best)  cpu us", static_cast<long long>(t));
  }
  std::printf("  speed-up  same bits\n");
  int failures = 0;
  for (const Case& c : Cases()) {
    if (!options.filter.empty() && c.name.find(options.filter) == std::string::npos) continue;
    StatusOr<std::unique_ptr<BoundKernel>> bound = BoundKernel::Create(c);
    if (!bound.ok()) {
      std::fprintf(stderr, "cpu_kernel_bench: %s: %s\n", c.name.c_str(),
                   bound.status().ToString().c_str());
      ++failures;
      continue;
    }
    BoundKernel& k = **bound;
    // Calls per sample, from one warm call on the first thread count.
    SetCpuComputeThreads(static_cast<int>(threads[0]));
    Status status = k.Call();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; status.ok() && i < 3; ++i) status = k.Call();
    const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3;
    const int64_t calls =
        std::max<int64_t>(3, static_cast<int64_t>(options.sample_ms * 1e-3 / std::max(one, 1e-7)));
    std::vector<std::vector<double>> wall(threads.size()), cpu(threads.size());
    std::vector<std::vector<HostTensor>> outputs(threads.size());
    for (int s = 0; status.ok() && s < options.samples; ++s) {
      for (size_t j = 0; status.ok() && j < threads.size(); ++j) {
        const size_t t = (j + s) % threads.size();
        SetCpuComputeThreads(static_cast<int>(threads[t]));
        status = k.Call();  // the team of this thread count is up
        const double cpu_before = ProcessCpuSeconds();
        const auto before = std::chrono::steady_clock::now();
        for (int64_t i = 0; status.ok() && i < calls; ++i) status = k.Call();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
        cpu[t].push_back((ProcessCpuSeconds() - cpu_before) * 1e6 / calls);
        wall[t].push_back(seconds * 1e6 / calls);
        if (s == 0) outputs[t] = k.CloneOutputs();
      }
    }
    if (!status.ok()) {
      std::fprintf(stderr, "cpu_kernel_bench: %s: %s\n", c.name.c_str(), status.ToString().c_str());
      ++failures;
      continue;
    }
    bool same = true;
    for (size_t t = 1; t < threads.size(); ++t) {
      for (size_t o = 0; o < outputs[0].size(); ++o) {
        same = same &&
               std::memcmp(outputs[t][o].raw(), outputs[0][o].raw(), outputs[0][o].ByteSize()) == 0;
      }
    }
    std::printf("%-50s", c.name.c_str());
    for (size_t t = 0; t < threads.size(); ++t) {
      std::printf("  %8.1f %7.1f %7.1f", Median(wall[t]),
                  *std::min_element(wall[t].begin(), wall[t].end()), Median(cpu[t]));
    }
    std::printf("  %7.2fx  %s\n", Median(wall[0]) / Median(wall.back()), same ? "yes" : "NO");
    if (!same) ++failures;
  }
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3) {
    std::printf("load average %.2f %.2f %.2f (at the end)\n", load[0], load[1], load[2]);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite;
  return bench::BenchMain(argc, argv, "cpu_kernel_bench", kUsage, FlagSpecs(), ReadOptions, Run);
}
