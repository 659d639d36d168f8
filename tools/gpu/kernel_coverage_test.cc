// Runs without a GPU (under --config=cuda): every registered op type except
// the data sources and the CPU-only fused ops has a float32 CUDA kernel, and every op of the MLP and
// LeNet-5 training jobs can be placed on the GPU.
#include <gtest/gtest.h>

#include <set>

#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_def.h"
#include "tools/gpu/gpu_jobs.h"

namespace oflite {
namespace {

// The data sources (source ops other than variables): the compiler puts
// them on the host of a GPU placement (TASK_SOURCE on the CPU), so they have
// no CUDA kernel.
std::set<std::string> HostSources() {
  std::set<std::string> sources;
  for (const std::string& type : RegisteredOpTypes()) {
    StatusOr<const OpDef*> def = LookupOpDef(type);
    if (def.ok() && (*def)->is_source && type != "variable") sources.insert(type);
  }
  return sources;
}

// Fused ops the compiler makes on CPU devices only (compiler/fusion.h):
// never placed on a GPU, so no CUDA kernel.
const std::set<std::string> kCpuOnlyFusedOps = {"gelu_and_derivative", "matmul_bias"};

TEST(CudaKernelCoverageTest, EveryOpButTheDataSourcesHasACudaKernel) {
  const std::vector<std::string> types = RegisteredOpTypes();
  ASSERT_GT(types.size(), 40u);
  const std::set<std::string> host_sources = HostSources();
  EXPECT_EQ(host_sources,
            (std::set<std::string>{"fashion_mnist", "host_feed", "npy_dataset", "random_batch",
                                   "token_window"}));
  for (const std::string& type : types) {
    if (host_sources.count(type) || kCpuOnlyFusedOps.count(type)) {
      EXPECT_FALSE(HasKernel(type, DEVICE_CUDA, DT_FLOAT)) << type;
      continue;
    }
    EXPECT_TRUE(HasKernel(type, DEVICE_CUDA, DT_FLOAT)) << "no CUDA float32 kernel for " << type;
  }
}

TEST(CudaKernelCoverageTest, TrainingJobsRunOnTheGpuExceptTheirSource) {
  const std::set<std::string> host_sources = HostSources();
  for (bool lenet : {false, true}) {
    auto job = lenet ? LeNetJob(8, 2, "0:cuda:0") : MlpJob(8, 2, "0:cuda:0");
    ASSERT_TRUE(job.ok()) << job.status();
    int sources = 0;
    for (const OpConf& op : job->op()) {
      if (host_sources.count(op.op_type())) {
        ++sources;
        continue;
      }
      EXPECT_TRUE(HasKernel(op.op_type(), DEVICE_CUDA, DT_FLOAT)) << op.name() << " " << op.op_type();
    }
    EXPECT_EQ(sources, 1);
  }
}

}  // namespace
}  // namespace oflite
