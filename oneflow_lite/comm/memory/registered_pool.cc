#include "oneflow_lite/comm/memory/registered_pool.h"

namespace oflite {
namespace comm {

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = other.pool_;
    region_ = other.region_;
    block_ = other.block_;
    data_ = other.data_;
    offset_ = other.offset_;
    size_ = other.size_;
    allocated_ = other.allocated_;
    other.pool_ = nullptr;
  }
  return *this;
}

void PoolBuffer::Release() {
  if (pool_ != nullptr) pool_->Free(block_, offset_, allocated_);
  pool_ = nullptr;
}

RemoteKey PoolBuffer::remote_key() const {
  RemoteKey key = region_->remote_key();
  key.address += offset_;
  key.length = size_;
  return key;
}

RegisteredPool::RegisteredPool(Transport* transport,
                               const RegisteredPoolOptions& options,
                               StrategyCounters* counters)
    : transport_(transport), options_(options), counters_(counters) {}

RegisteredPool::~RegisteredPool() = default;

StatusOr<std::unique_ptr<RegisteredPool>> RegisteredPool::Create(
    Transport* transport, const RegisteredPoolOptions& options,
    StrategyCounters* counters) {
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) ||
      options.alignment > 4096) {
    return InvalidArgumentError("pool alignment ", options.alignment,
                                " is not a power of two of at most 4096");
  }
  std::unique_ptr<RegisteredPool> pool(
      new RegisteredPool(transport, options, counters));
  std::lock_guard<std::mutex> lock(pool->mutex_);
  for (size_t i = 0; i < options.initial_blocks; ++i) {
    RETURN_IF_ERROR(pool->AddBlockLocked(options.block_size));
  }
  return pool;
}

Status RegisteredPool::AddBlockLocked(size_t size) {
  if (registered_bytes_ + size > options_.max_bytes) {
    return ResourceExhaustedError("registered pool of rank ", transport_->rank(),
                                  ": ", size, " more bytes would exceed the cap of ",
                                  options_.max_bytes);
  }
  Block block;
  block.size = size;
  StatusOr<std::unique_ptr<MemoryRegion>> region =
      transport_->AllocateRegistered(size, kAccessAll);
  if (!region.ok()) {
    return region.status().WithContext("registered pool of rank " +
                                       std::to_string(transport_->rank()) + ": a block of " +
                                       std::to_string(size) + " bytes");
  }
  block.region = std::move(*region);
  if (size > 0) block.free[0] = size;
  blocks_.push_back(std::move(block));
  registered_bytes_ += size;
  if (counters_) ++counters_->registrations;
  return Status::OK();
}

bool RegisteredPool::CarveLocked(int index, size_t length, size_t* offset) {
  auto& free = blocks_[index].free;
  for (auto it = free.begin(); it != free.end(); ++it) {
    if (it->second < length) continue;
    *offset = it->first;
    const size_t left = it->second - length;
    free.erase(it);
    if (left > 0) free[*offset + length] = left;
    return true;
  }
  return false;
}

StatusOr<PoolBuffer> RegisteredPool::Allocate(size_t size) {
  const size_t alignment = options_.alignment;
  // Zero-size buffers still get a distinct aligned slot.
  const size_t length = std::max<size_t>(alignment, (size + alignment - 1) / alignment * alignment);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t offset = 0;
  int found = -1;
  for (int i = 0; i < static_cast<int>(blocks_.size()) && found < 0; ++i) {
    if (CarveLocked(i, length, &offset)) found = i;
  }
  if (found < 0) {
    RETURN_IF_ERROR(AddBlockLocked(std::max(options_.block_size, length)));
    found = static_cast<int>(blocks_.size()) - 1;
    CHECK(CarveLocked(found, length, &offset));
  }
  PoolBuffer buffer;
  buffer.pool_ = this;
  buffer.block_ = found;
  buffer.region_ = blocks_[found].region.get();
  buffer.data_ = blocks_[found].region->data() + offset;
  buffer.offset_ = offset;
  buffer.size_ = size;
  buffer.allocated_ = length;
  return buffer;
}

void RegisteredPool::Free(int index, size_t offset, size_t length) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& free = blocks_[index].free;
  auto next = free.lower_bound(offset);
  CHECK(next == free.end() || next->first >= offset + length)
      << "pool buffer freed twice or overlapping";
  // Coalesce with the following and the preceding ranges.
  if (next != free.end() && next->first == offset + length) {
    length += next->second;
    next = free.erase(next);
  }
  if (next != free.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += length;
      return;
    }
  }
  free[offset] = length;
}

size_t RegisteredPool::registered_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return registered_bytes_;
}

size_t RegisteredPool::free_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const Block& block : blocks_) {
    for (const auto& [offset, length] : block.free) total += length;
  }
  return total;
}

}  // namespace comm
}  // namespace oflite
