// The jobs the GPU check and benchmark run: the 784-256-256-10 MLP (SGD, lr
// 0.1) and LeNet-5 (momentum 0.9, lr 0.05), both on synthetic random_batch
// data (the GPU machine has no dataset), placed on one device.
#ifndef ONEFLOW_LITE_TOOLS_GPU_GPU_JOBS_H_
#define ONEFLOW_LITE_TOOLS_GPU_GPU_JOBS_H_

#include <string>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

// `placement` such as "0:cuda:0" or "0:cpu:0".
// `hidden`: the width of both hidden layers (256; the large MLP uses 4096).
StatusOr<Job> MlpJob(int64_t batch, int64_t iterations, const std::string& placement,
                     int64_t hidden = 256);
StatusOr<Job> LeNetJob(int64_t batch, int64_t iterations, const std::string& placement);

}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_GPU_GPU_JOBS_H_
