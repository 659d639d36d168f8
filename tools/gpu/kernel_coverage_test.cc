// Runs without a GPU (under --config=cuda): every registered op type except
// the data sources has a float32 CUDA kernel, and every op of the MLP and
// LeNet-5 training jobs can be placed on the GPU.
#include <gtest/gtest.h>

#include <set>

#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_def.h"
#include "tools/gpu/gpu_jobs.h"

namespace oflite {
namespace {

const std::set<std::string> kHostSources = {"fashion_mnist", "random_batch"};

TEST(CudaKernelCoverageTest, EveryOpButTheDataSourcesHasACudaKernel) {
  const std::vector<std::string> types = RegisteredOpTypes();
  ASSERT_GT(types.size(), 40u);
  for (const std::string& type : types) {
    if (kHostSources.count(type)) {
      EXPECT_FALSE(HasKernel(type, DEVICE_CUDA, DT_FLOAT)) << type;
      continue;
    }
    EXPECT_TRUE(HasKernel(type, DEVICE_CUDA, DT_FLOAT)) << "no CUDA float32 kernel for " << type;
  }
}

TEST(CudaKernelCoverageTest, TrainingJobsRunOnTheGpuExceptTheirSource) {
  for (bool lenet : {false, true}) {
    auto job = lenet ? LeNetJob(8, 2, "0:cuda:0") : MlpJob(8, 2, "0:cuda:0");
    ASSERT_TRUE(job.ok()) << job.status();
    int sources = 0;
    for (const OpConf& op : job->op()) {
      if (kHostSources.count(op.op_type())) {
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
