#include "oneflow_lite/device/device_backend.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace oflite {
namespace {

constexpr int64_t kHostAlignment = 64;

class HostBlock final : public MemoryBlock {
 public:
  HostBlock(char* data, int64_t size) : data_(data), size_(size) {}
  ~HostBlock() override { std::free(data_); }
  char* data() const override { return data_; }
  int64_t size() const override { return size_; }

 private:
  char* data_;
  int64_t size_;
};

struct Registry {
  std::mutex mutex;
  std::map<int, DeviceBackendFactory> factories;
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();  // never destroyed: used at exit
  return *registry;
}

}  // namespace

StatusOr<std::unique_ptr<MemoryBlock>> AllocateHostBlock(int64_t bytes,
                                                         const std::string& zone_name) {
  if (bytes < 0) return InvalidArgumentError("memory zone ", zone_name, ": negative size");
  const int64_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  char* data = nullptr;
  if (rounded > 0) {
    data = static_cast<char*>(std::aligned_alloc(kHostAlignment, static_cast<size_t>(rounded)));
    if (data == nullptr) {
      return ResourceExhaustedError("memory zone ", zone_name, ": cannot allocate ", bytes,
                                    " bytes");
    }
    std::memset(data, 0, static_cast<size_t>(rounded));
  }
  return std::unique_ptr<MemoryBlock>(new HostBlock(data, bytes));
}

DeviceBackendRegistrar::DeviceBackendRegistrar(DeviceType type, DeviceBackendFactory factory) {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.factories[type] = std::move(factory);
}

bool HasDeviceBackend(DeviceType type) {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  return registry.factories.count(type) > 0;
}

StatusOr<std::unique_ptr<DeviceBackend>> CreateDeviceBackend(DeviceType type,
                                                             const DeviceBackendOptions& options) {
  DeviceBackendFactory factory;
  {
    Registry& registry = TheRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    auto it = registry.factories.find(type);
    if (it != registry.factories.end()) factory = it->second;
  }
  if (!factory) {
    return UnimplementedError("no ", DeviceType_Name(type), " backend in this binary",
                              type == DEVICE_CUDA
                                  ? " (build with --config=cuda and link "
                                    "//oneflow_lite/device/cuda:cuda_backend)"
                                  : "");
  }
  return factory(options);
}

}  // namespace oflite
