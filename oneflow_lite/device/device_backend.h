// DeviceBackend: what the runtime needs from a device kind the host build
// cannot provide by itself: memory for device and pinned-host zones, and the
// context of each stream thread on such a device.
//
// Backends are plugged in by device type through a registry of factories,
// the same way kernels are: a backend library (the CUDA one is
// //oneflow_lite/device/cuda:cuda_backend, built only under --config=cuda)
// registers its factory with a static DeviceBackendRegistrar and is linked
// with alwayslink, so the CPU build neither compiles nor links any device
// code. The runtime creates one backend object per run
// (CreateDeviceBackend) and owns it; the backend's per-run state (e.g. one
// completion poller per GPU) lives in that object. Contexts a backend
// creates must be destroyed before the backend.
//
// The registry is written only during static initialization and read
// afterwards; lookups are thread-safe. A backend object is used from the
// runtime's set-up thread (allocation) and from stream threads (contexts);
// implementations say what they lock.
#ifndef ONEFLOW_LITE_DEVICE_DEVICE_BACKEND_H_
#define ONEFLOW_LITE_DEVICE_DEVICE_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/device/device_context.h"
#include "proto/common.pb.h"

namespace oflite {

// One owned allocation (a memory zone's block). Immutable after creation;
// frees its memory in the destructor.
class MemoryBlock {
 public:
  virtual ~MemoryBlock() = default;
  virtual char* data() const = 0;
  virtual int64_t size() const = 0;
};

// 64-byte aligned, zero-filled host memory. ResourceExhausted naming
// `zone_name` and the size when the system refuses.
StatusOr<std::unique_ptr<MemoryBlock>> AllocateHostBlock(int64_t bytes,
                                                         const std::string& zone_name);

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual DeviceType device_type() const = 0;
  // One block of `bytes` on device `device_index`, zero-filled. Errors name
  // `zone_name` ("m0/cuda:1") and the size.
  virtual StatusOr<std::unique_ptr<MemoryBlock>> AllocateDevice(int device_index, int64_t bytes,
                                                                const std::string& zone_name) = 0;
  // Host memory the device's copy engines read and write directly.
  virtual StatusOr<std::unique_ptr<MemoryBlock>> AllocatePinnedHost(
      int64_t bytes, const std::string& zone_name) = 0;
  // The context of one stream thread on device `device_index`; `label`
  // ("m0/cuda0/s1") names it in errors.
  virtual StatusOr<std::unique_ptr<DeviceContext>> CreateStreamContext(
      int device_index, const std::string& label) = 0;
};

// Process policy a backend applies, passed in by whoever creates the
// runtime (oflite run reads OFLITE_CUDA_ALLOW_TF32 into it); backends never
// read the environment.
struct DeviceBackendOptions {
  // CUDA matmuls may use TF32 tensor cores (faster, about 1e-3 relative
  // error) instead of full FP32; an op's `allow_tf32` attribute also does.
  bool allow_tf32 = false;
};

using DeviceBackendFactory =
    std::function<StatusOr<std::unique_ptr<DeviceBackend>>(const DeviceBackendOptions&)>;

// Registers the factory of `type` (at static-initialization time).
class DeviceBackendRegistrar {
 public:
  DeviceBackendRegistrar(DeviceType type, DeviceBackendFactory factory);
};

bool HasDeviceBackend(DeviceType type);
// A new backend object of `type`; Unimplemented naming the type (and the
// build flag that adds it) when no backend of that type is linked in.
StatusOr<std::unique_ptr<DeviceBackend>> CreateDeviceBackend(
    DeviceType type, const DeviceBackendOptions& options = DeviceBackendOptions());

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_DEVICE_BACKEND_H_
