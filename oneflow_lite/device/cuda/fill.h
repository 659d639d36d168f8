// A device-side fill, used by the device self-test and to poison outputs in
// GPU kernel tests. Plain C++ interface so .cu code needs no protobuf/glog.
#ifndef ONEFLOW_LITE_DEVICE_CUDA_FILL_H_
#define ONEFLOW_LITE_DEVICE_CUDA_FILL_H_

#include <cstdint>

#include <cuda_runtime_api.h>

namespace oflite {

// Enqueues out[i] = value for i < n on `stream`.
cudaError_t LaunchFill(float* out, int64_t n, float value, cudaStream_t stream);

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_CUDA_FILL_H_
