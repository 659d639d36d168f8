// DeviceContext: what a kernel needs from the device it runs on.
//
// The CPU context is empty (kernels run on the actor's thread). The CUDA
// context (device/cuda/cuda_device_context.h) carries the actor thread's
// stream and library handles; CUDA kernels downcast with
// static_cast<const CudaDeviceContext*>. A context is owned by the runtime's
// stream thread and outlives every kernel call made with it; it is used from
// that one thread only.
#ifndef ONEFLOW_LITE_DEVICE_DEVICE_CONTEXT_H_
#define ONEFLOW_LITE_DEVICE_DEVICE_CONTEXT_H_

#include "proto/common.pb.h"

namespace oflite {

class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  virtual DeviceType device_type() const = 0;
  virtual int device_index() const { return 0; }
};

class CpuDeviceContext final : public DeviceContext {
 public:
  DeviceType device_type() const override { return DEVICE_CPU; }
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_DEVICE_CONTEXT_H_
