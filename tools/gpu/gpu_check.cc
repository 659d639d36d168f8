// gpu_check: the MLP and LeNet-5 training jobs on cuda:0 against the CPU
// reference executor, 20 iterations each, same seed and synthetic data.
// Passes when every iteration's loss agrees within 1e-3 relative and the
// final variables within 1e-3 (||gpu - cpu|| / ||cpu|| per variable); FP32
// summation order differs between cuBLAS/cuDNN and the CPU kernels, so the
// bound is looser than the per-kernel one.
//
//   gpu_check [--iters 20]     (exit status 0 = pass; prints one line per job)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "oneflow_lite/device/cuda/cuda_util.h"
#include "oneflow_lite/reference/reference_executor.h"
#include "tools/gpu/gpu_jobs.h"
#include "tools/gpu/single_gpu_executor.h"

namespace oflite {
namespace {

constexpr double kLossTolerance = 1e-3;
constexpr double kVariableTolerance = 1e-3;

double RelativeError(const HostTensor& got, const HostTensor& want) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < want.elem_count(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    diff += (g - w) * (g - w);
    norm += w * w;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

StatusOr<bool> CheckJob(const std::string& name, const Job& gpu_job, const Job& cpu_job,
                        int64_t iters) {
  ASSIGN_OR_RETURN(ReferenceTrainResult cpu, TrainReference(cpu_job, iters));
  ASSIGN_OR_RETURN(auto gpu, SingleGpuExecutor::Create(gpu_job, {}));
  double worst_loss = 0;
  double first = 0, last = 0;
  for (int64_t t = 0; t < iters; ++t) {
    RETURN_IF_ERROR(gpu->Step());
    ASSIGN_OR_RETURN(auto metrics, gpu->Metrics());
    const double loss = metrics.at("loss"), want = cpu.losses.at(t);
    if (t == 0) first = loss;
    last = loss;
    worst_loss = std::max(worst_loss, std::fabs(loss - want) / std::max(1e-12, std::fabs(want)));
  }
  ASSIGN_OR_RETURN(auto variables, gpu->Variables());
  double worst_variable = 0;
  std::string worst_name;
  for (const auto& [var, value] : cpu.variables) {
    const double e = RelativeError(variables.at(var), value);
    if (e > worst_variable) {
      worst_variable = e;
      worst_name = var;
    }
  }
  const bool pass = worst_loss < kLossTolerance && worst_variable < kVariableTolerance &&
                    std::isfinite(last) && last < first;
  std::printf("gpu_check %-8s %s  loss %.5f -> %.5f  max loss rel err %.2e  max var rel err %.2e (%s)\n",
              name.c_str(), pass ? "PASS" : "FAIL", first, last, worst_loss, worst_variable,
              worst_name.c_str());
  return pass;
}

int Main(int argc, char** argv) {
  int64_t iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoll(argv[i + 1]);
  }
  if (CudaDeviceCount() == 0) {
    std::printf("gpu_check SKIPPED: no CUDA device\n");
    return 77;
  }
  bool all = true;
  for (const char* model : {"mlp", "lenet5"}) {
    const bool lenet = !std::strcmp(model, "lenet5");
    const int64_t batch = lenet ? 256 : 64;
    auto gpu_job = lenet ? LeNetJob(batch, iters, "0:cuda:0") : MlpJob(batch, iters, "0:cuda:0");
    auto cpu_job = lenet ? LeNetJob(batch, iters, "0:cpu:0") : MlpJob(batch, iters, "0:cpu:0");
    if (!gpu_job.ok() || !cpu_job.ok()) {
      std::printf("gpu_check %s FAIL: %s\n", model,
                  (gpu_job.ok() ? cpu_job.status() : gpu_job.status()).ToString().c_str());
      all = false;
      continue;
    }
    auto pass = CheckJob(model, *gpu_job, *cpu_job, iters);
    if (!pass.ok()) {
      std::printf("gpu_check %s FAIL: %s\n", model, pass.status().ToString().c_str());
      all = false;
    } else {
      all = all && *pass;
    }
  }
  return all ? 0 : 1;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) { return oflite::Main(argc, argv); }
