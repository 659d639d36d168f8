// Checked CUDA runtime, cuBLAS and cuDNN calls.
//
// Every call goes through one of the macros below, which turn a failure into
// a Status naming the call, the file:line and the library's error string;
// callers add the op or actor with Status::WithContext. Nothing here aborts.
#ifndef ONEFLOW_LITE_DEVICE_CUDA_CUDA_UTIL_H_
#define ONEFLOW_LITE_DEVICE_CUDA_CUDA_UTIL_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "oneflow_lite/common/status.h"

namespace oflite {

Status CudaStatus(cudaError_t err, const char* call, const char* file, int line);
Status CublasStatus(cublasStatus_t err, const char* call, const char* file, int line);
Status CudnnStatus(cudnnStatus_t err, const char* call, const char* file, int line);

// Number of usable CUDA devices; 0 (not an error) when there is no driver or
// no device, so CPU-only machines can skip GPU work cleanly.
int CudaDeviceCount();

}  // namespace oflite

#define CUDA_RETURN_IF_ERROR(call) \
  RETURN_IF_ERROR(::oflite::CudaStatus((call), #call, __FILE__, __LINE__))
#define CUBLAS_RETURN_IF_ERROR(call) \
  RETURN_IF_ERROR(::oflite::CublasStatus((call), #call, __FILE__, __LINE__))
#define CUDNN_RETURN_IF_ERROR(call) \
  RETURN_IF_ERROR(::oflite::CudnnStatus((call), #call, __FILE__, __LINE__))

#endif  // ONEFLOW_LITE_DEVICE_CUDA_CUDA_UTIL_H_
