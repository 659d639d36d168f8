#include "oneflow_lite/comm/per_peer_transport.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>

#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace {

constexpr uint32_t kPerPeerVersion = 1;

// A buffer registered with both providers under the cross-host key.
class PerPeerRegion : public MemoryRegion {
 public:
  PerPeerRegion(void* data, size_t size, uint32_t access, std::unique_ptr<MemoryRegion> remote,
                std::unique_ptr<MemoryRegion> local)
      : MemoryRegion(data, size, access), remote_(std::move(remote)), local_(std::move(local)) {}
  uint32_t local_key() const override { return remote_->local_key(); }
  RemoteKey remote_key() const override { return remote_->remote_key(); }

 private:
  std::unique_ptr<MemoryRegion> remote_;
  std::unique_ptr<MemoryRegion> local_;
};

class PerPeerTransport : public Transport {
 public:
  PerPeerTransport(const TransportOptions& options, std::unique_ptr<shm::ShmTransport> local,
                   std::unique_ptr<Transport> remote, const std::string& host_id)
      : options_(options),
        local_(std::move(local)),
        remote_(std::move(remote)),
        host_id_(host_id) {}

  const char* provider_name() const override { return "auto"; }
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

  std::string PeerProvider(int peer_rank) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = chosen_.find(peer_rank);
    return found == chosen_.end() ? std::string("auto") : found->second->provider_name();
  }

  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* data, size_t size,
                                                         uint32_t access) override {
    ASSIGN_OR_RETURN(auto remote, remote_->RegisterMemory(data, size, access));
    ASSIGN_OR_RETURN(auto local,
                     local_->RegisterMemoryWithKey(data, size, access, remote->remote_key().rkey));
    return std::unique_ptr<MemoryRegion>(
        new PerPeerRegion(data, size, access, std::move(remote), std::move(local)));
  }

  // shm's memfd: regions registered inside it are mapped by the peers on
  // this host (the cross-host provider registers them as any memory);
  // AllocateRegistered (Transport's default) is such a block registered
  // with both.
  StatusOr<std::unique_ptr<SharedBlock>> AllocateShareable(size_t size) override {
    return local_->AllocateShareable(size);
  }

  StatusOr<std::string> LocalEndpoint(int peer_rank) override {
    ASSIGN_OR_RETURN(std::string local, local_->LocalEndpoint(peer_rank));
    ASSIGN_OR_RETURN(std::string remote, remote_->LocalEndpoint(peer_rank));
    std::string bytes;
    wire::AppendU32(&bytes, kPerPeerVersion);
    wire::AppendBytes(&bytes, host_id_);
    wire::AppendBytes(&bytes, local);
    wire::AppendBytes(&bytes, remote);
    return bytes;
  }

  Status Connect(int peer_rank, const std::string& peer_endpoint, Deadline deadline) override {
    wire::Reader reader(peer_endpoint.data(), peer_endpoint.size());
    uint32_t version = 0;
    std::string host, local, remote;
    reader.ReadU32(&version);
    reader.ReadBytes(&host, 1024);
    reader.ReadBytes(&local, 4096);
    reader.ReadBytes(&remote, 1 << 16);
    RETURN_IF_ERROR(reader.status("auto endpoint of rank " + std::to_string(peer_rank)));
    if (version != kPerPeerVersion) {
      return FailedPreconditionError("rank ", peer_rank, " speaks auto endpoint version ", version,
                                     ", this build ", kPerPeerVersion,
                                     " (same --comm on every rank?)");
    }
    const bool same_host = host == host_id_;
    Transport* provider = same_host ? static_cast<Transport*>(local_.get()) : remote_.get();
    RETURN_IF_ERROR(provider->Connect(peer_rank, same_host ? local : remote, deadline));
    std::lock_guard<std::mutex> lock(mutex_);
    chosen_[peer_rank] = provider;
    return Status::OK();
  }

  StatusOr<Connection*> GetConnection(int peer_rank) override {
    Transport* provider = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = chosen_.find(peer_rank);
      if (found != chosen_.end()) provider = found->second;
    }
    if (provider == nullptr) {
      return FailedPreconditionError("rank ", options_.rank, " is not connected to rank ",
                                     peer_rank);
    }
    return provider->GetConnection(peer_rank);
  }

  // Both providers; each keeps its own handlers serialized (as with their
  // progress threads, the two may run handlers for different peers at once).
  bool Poll() override {
    const bool local = local_->Poll();
    return remote_->Poll() || local;
  }
  void EndPolling() override {
    local_->EndPolling();
    remote_->EndPolling();
  }
  void BeginBlockingWait() override {
    local_->BeginBlockingWait();
    remote_->BeginBlockingWait();
  }
  void EndBlockingWait() override {
    local_->EndBlockingWait();
    remote_->EndBlockingWait();
  }

 private:
  const TransportOptions options_;
  const std::unique_ptr<shm::ShmTransport> local_;
  const std::unique_ptr<Transport> remote_;
  const std::string host_id_;
  mutable std::mutex mutex_;
  std::map<int, Transport*> chosen_;  // by peer rank, once connected
};

std::string FirstLine(const char* path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

}  // namespace

std::unique_ptr<Transport> CreatePerPeerTransport(const TransportOptions& options,
                                                  std::unique_ptr<shm::ShmTransport> local,
                                                  std::unique_ptr<Transport> remote,
                                                  const std::string& host_id) {
  return std::make_unique<PerPeerTransport>(options, std::move(local), std::move(remote), host_id);
}

std::string DefaultHostIdentity() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  char netns[128] = {0};
  const ssize_t length = ::readlink("/proc/self/ns/net", netns, sizeof(netns) - 1);
  if (length > 0) netns[length] = 0;
  return std::string(host) + "/" + FirstLine("/proc/sys/kernel/random/boot_id") + "/" + netns;
}

}  // namespace comm
}  // namespace oflite
