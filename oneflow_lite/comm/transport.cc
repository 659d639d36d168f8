#include "oneflow_lite/comm/transport.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ios>
#include <map>
#include <mutex>
#include <vector>

#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {

Status Connection::CheckBatchSizes(const std::vector<std::string>& messages) const {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].size() > max_message_size()) {
      return InvalidArgumentError("message ", i, " of a batch of ", messages.size(), " (",
                                  messages[i].size(), " bytes) to rank ", peer_rank(),
                                  " exceeds the maximum of ", max_message_size());
    }
  }
  return Status::OK();
}

namespace {

constexpr size_t kAllocationAlignment = 4096;

class HeapBlock : public SharedBlock {
 public:
  HeapBlock(uint8_t* data, size_t size) : data_(data), size_(size) {}
  ~HeapBlock() override { std::free(data_); }
  uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  uint8_t* const data_;
  const size_t size_;
};

}  // namespace

StatusOr<std::unique_ptr<SharedBlock>> Transport::AllocateShareable(size_t size) {
  const size_t rounded =
      std::max(kAllocationAlignment,
               (size + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment);
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(kAllocationAlignment, rounded));
  if (data == nullptr) {
    return ResourceExhaustedError("rank ", rank(), ": cannot allocate ", size, " bytes");
  }
  std::memset(data, 0, rounded);
  return std::unique_ptr<SharedBlock>(new HeapBlock(data, size));
}

StatusOr<std::unique_ptr<MemoryRegion>> Transport::AllocateRegistered(size_t size,
                                                                      uint32_t access) {
  ASSIGN_OR_RETURN(std::unique_ptr<SharedBlock> block, AllocateShareable(size));
  ASSIGN_OR_RETURN(std::unique_ptr<MemoryRegion> region,
                   RegisterMemory(block->data(), size, access));
  region->owned_ = std::move(block);  // the provider's own region type stays
  return region;
}

Status Connection::SendMessages(std::vector<std::string> messages) {
  RETURN_IF_ERROR(CheckBatchSizes(messages));
  for (const std::string& message : messages) {
    RETURN_IF_ERROR(SendMessage(message.data(), message.size()));
  }
  return Status::OK();
}

Status Connection::SendMessageParts(const void* head, size_t head_size, const void* body,
                                    size_t body_size) {
  std::string message;
  message.reserve(head_size + body_size);
  message.append(static_cast<const char*>(head), head_size);
  message.append(static_cast<const char*>(body), body_size);
  return SendMessage(message.data(), message.size());
}

std::string RemoteKey::Encode() const {
  std::string bytes;
  bytes.reserve(kEncodedSize);
  wire::AppendU64(&bytes, address);
  wire::AppendU64(&bytes, length);
  wire::AppendU32(&bytes, rkey);
  wire::AppendU32(&bytes, 0);  // reserved, must be zero
  return bytes;
}

StatusOr<RemoteKey> RemoteKey::Decode(const std::string& bytes) {
  if (bytes.size() != kEncodedSize) {
    return InvalidArgumentError("remote key: expected ", kEncodedSize,
                                " bytes, got ", bytes.size());
  }
  wire::Reader reader(bytes.data(), bytes.size());
  RemoteKey key;
  uint32_t reserved = 0;
  reader.ReadU64(&key.address);
  reader.ReadU64(&key.length);
  reader.ReadU32(&key.rkey);
  reader.ReadU32(&reserved);
  if (reserved != 0) {
    return InvalidArgumentError("remote key: reserved field is ", reserved);
  }
  return key;
}

std::string DescribePeerProviders(const Transport& transport) {
  std::map<std::string, std::vector<int>> ranks_by_provider;
  for (int peer = 0; peer < transport.world_size(); ++peer) {
    if (peer != transport.rank()) ranks_by_provider[transport.PeerProvider(peer)].push_back(peer);
  }
  if (ranks_by_provider.size() <= 1) {
    return ranks_by_provider.empty() ? transport.provider_name() : ranks_by_provider.begin()->first;
  }
  std::string text = std::string(transport.provider_name()) + ":";
  const char* separator = " ";
  for (const auto& [provider, ranks] : ranks_by_provider) {
    text += separator + provider + (ranks.size() == 1 ? " to rank " : " to ranks ");
    for (size_t i = 0; i < ranks.size(); ++i) {
      text += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    separator = "; ";
  }
  return text;
}

Status CheckTransferBounds(int peer_rank, const MemoryRegion& local,
                           size_t local_offset, const RemoteKey& remote,
                           size_t remote_offset, size_t length) {
  if (local_offset > local.size() || length > local.size() - local_offset) {
    return InvalidArgumentError("transfer with rank ", peer_rank,
                                ": local range [", local_offset, ", +",
                                length, ") exceeds the region of ",
                                local.size(), " bytes");
  }
  if (remote_offset > remote.length ||
      length > remote.length - remote_offset) {
    return InvalidArgumentError("transfer with rank ", peer_rank,
                                ": remote range [", remote_offset, ", +",
                                length, ") exceeds the remote region of ",
                                remote.length, " bytes");
  }
  return Status::OK();
}

Status CheckRegionAccess(uint32_t rkey, uint64_t base, uint64_t size,
                         uint32_t granted, uint64_t address, uint64_t length,
                         uint32_t access) {
  if (address < base || address - base > size ||
      length > size - (address - base)) {
    return OutOfRangeError("range [0x", std::hex, address, ", +", std::dec,
                           length, ") outside region key 0x", std::hex, rkey,
                           " at [0x", base, ", +", std::dec, size, ")");
  }
  if ((granted & access) != access) {
    return PermissionDeniedError("region key 0x", std::hex, rkey, std::dec,
                                 " does not grant remote ",
                                 (access & kAccessRemoteWrite) ? "write" : "read");
  }
  return Status::OK();
}

namespace {

struct SyncState {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  Status status;
};

Status WaitFor(const std::shared_ptr<SyncState>& state, int peer_rank,
               const char* what, Deadline deadline) {
  std::unique_lock<std::mutex> lock(state->mutex);
  if (!state->done_cv.wait_until(lock, deadline, [&] { return state->done; })) {
    return DeadlineExceededError(what, " with rank ", peer_rank,
                                 " did not complete before the deadline");
  }
  return state->status;
}

Completion Notifier(const std::shared_ptr<SyncState>& state) {
  return [state](const Status& status) {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->status = status;
    state->done = true;
    state->done_cv.notify_all();
  };
}

}  // namespace

Status ReadSync(Connection* connection, const MemoryRegion& local,
                size_t local_offset, const RemoteKey& remote,
                size_t remote_offset, size_t length, Deadline deadline) {
  auto state = std::make_shared<SyncState>();
  RETURN_IF_ERROR(connection->PostRead(local, local_offset, remote,
                                       remote_offset, length,
                                       Notifier(state)));
  return WaitFor(state, connection->peer_rank(), "READ", deadline);
}

Status WriteSync(Connection* connection, const MemoryRegion& local,
                 size_t local_offset, const RemoteKey& remote,
                 size_t remote_offset, size_t length, Deadline deadline) {
  auto state = std::make_shared<SyncState>();
  RETURN_IF_ERROR(connection->PostWrite(local, local_offset, remote,
                                        remote_offset, length,
                                        Notifier(state)));
  return WaitFor(state, connection->peer_rank(), "WRITE", deadline);
}

}  // namespace comm
}  // namespace oflite
