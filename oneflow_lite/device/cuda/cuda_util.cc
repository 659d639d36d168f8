#include "oneflow_lite/device/cuda/cuda_util.h"

namespace oflite {

Status CudaStatus(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return Status::OK();
  cudaGetLastError();  // clear a non-sticky error so later calls are not blamed
  return InternalError(call, " failed at ", file, ":", line, ": ", cudaGetErrorName(err), " (",
                       cudaGetErrorString(err), ")");
}

Status CublasStatus(cublasStatus_t err, const char* call, const char* file, int line) {
  if (err == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return InternalError(call, " failed at ", file, ":", line, ": ", cublasGetStatusName(err), " (",
                       cublasGetStatusString(err), ")");
}

Status CudnnStatus(cudnnStatus_t err, const char* call, const char* file, int line) {
  if (err == CUDNN_STATUS_SUCCESS) return Status::OK();
  return InternalError(call, " failed at ", file, ":", line, ": ", cudnnGetErrorString(err));
}

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace oflite
