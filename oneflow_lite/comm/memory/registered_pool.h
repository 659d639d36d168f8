// Strategy (1): a registered pool. Large blocks are registered with the
// transport up front (or on demand, each registration counted) and cut into
// transient buffers by a first-fit sub-allocator with coalescing, so the hot
// path never registers memory. Used for staging buffers, bounce buffers and
// collective scratch space.
//
// A PoolBuffer is a move-only RAII handle: it returns its bytes to the pool
// when destroyed and must not outlive the pool. Its RemoteKey covers exactly
// its bytes (same provider key as the block). Thread-safe.
#ifndef ONEFLOW_LITE_COMM_MEMORY_REGISTERED_POOL_H_
#define ONEFLOW_LITE_COMM_MEMORY_REGISTERED_POOL_H_

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "oneflow_lite/comm/memory/counters.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

struct RegisteredPoolOptions {
  size_t block_size = 16u << 20;
  size_t alignment = 64;  // at most 4096 (blocks start on a page)
  size_t max_bytes = size_t{1} << 32;  // total registered, all blocks
  size_t initial_blocks = 1;
};

class RegisteredPool;

class PoolBuffer {
 public:
  PoolBuffer() = default;
  PoolBuffer(PoolBuffer&& other) noexcept { *this = std::move(other); }
  PoolBuffer& operator=(PoolBuffer&& other) noexcept;
  ~PoolBuffer() { Release(); }

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // The registered block holding this buffer and the buffer's offset in it.
  const MemoryRegion& region() const { return *region_; }
  size_t offset() const { return offset_; }
  RemoteKey remote_key() const;

 private:
  friend class RegisteredPool;
  void Release();

  RegisteredPool* pool_ = nullptr;
  const MemoryRegion* region_ = nullptr;
  int block_ = -1;
  uint8_t* data_ = nullptr;
  size_t offset_ = 0;
  size_t size_ = 0;        // requested
  size_t allocated_ = 0;   // rounded to the alignment
};

class RegisteredPool {
 public:
  static StatusOr<std::unique_ptr<RegisteredPool>> Create(
      Transport* transport, const RegisteredPoolOptions& options,
      StrategyCounters* counters);
  ~RegisteredPool();

  // A buffer of `size` bytes (0 allowed); registers a new block when none
  // has room (a request larger than block_size gets its own block).
  // ResourceExhausted beyond max_bytes.
  StatusOr<PoolBuffer> Allocate(size_t size);

  size_t registered_bytes() const;
  size_t free_bytes() const;

 private:
  struct Block {
    // Transport::AllocateRegistered: owns its memory (shm: a memfd peers
    // on the host map).
    std::unique_ptr<MemoryRegion> region;
    size_t size;
    std::map<size_t, size_t> free;  // offset -> length
  };
  RegisteredPool(Transport* transport, const RegisteredPoolOptions& options,
                 StrategyCounters* counters);
  Status AddBlockLocked(size_t size);
  bool CarveLocked(int block, size_t length, size_t* offset);
  void Free(int block, size_t offset, size_t length);
  friend class PoolBuffer;

  Transport* const transport_;
  const RegisteredPoolOptions options_;
  StrategyCounters* const counters_;
  mutable std::mutex mutex_;
  std::vector<Block> blocks_;
  size_t registered_bytes_ = 0;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_MEMORY_REGISTERED_POOL_H_
