// The shm provider's shared objects: anonymous memory files (memfd) mapped
// by two processes, and the fixed layouts that live in them. Layouts are
// described in docs/comm.md ("The shm provider"); both processes run the
// same build, so the structures below are the wire format (version
// kShmVersion, checked in the handshake).
//
// Nothing here has a name in a file system: a memfd lives as long as a
// descriptor or a mapping refers to it, so a killed process leaves nothing
// in /dev/shm. Mappings are sealed against growing and shrinking before a
// peer sees them, so a peer cannot make our accesses fault (SIGBUS).
//
// SharedMapping is thread-compatible (one owner); the atomics in the layouts
// are the only state both processes touch.
#ifndef ONEFLOW_LITE_COMM_SHM_SHM_SEGMENT_H_
#define ONEFLOW_LITE_COMM_SHM_SHM_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {
namespace shm {

constexpr uint32_t kShmVersion = 3;  // 3: region entries name their memfd
constexpr uint32_t kSegmentMagic = 0x4d53464f;  // "OFSM"
constexpr uint32_t kTableMagic = 0x5453464f;    // "OFST"
// Each ring slot starts with a descriptor: the length (u32) of the message
// whose sequence number maps to the slot, and the slot (u32) whose payload
// area holds its bytes. The payload area follows the descriptor. The
// producer picks that slot among those whose messages were consumed: for a
// message of at most kHotSlotMaxBytes the most recently freed (a stream of
// small messages reuses a few cache-resident buffers instead of touching
// every slot in turn), for a larger one the longest free (as a plain ring
// would: a large payload is cheaper to write into lines the consumer's
// core no longer holds).
constexpr size_t kSlotHeaderSize = 8;
constexpr size_t kHotSlotMaxBytes = 16 * 1024;

// A memfd and its mapping. Owns both; the descriptor may be closed early
// (CloseFd) once every peer that needs it has its own copy.
class SharedMapping {
 public:
  // A new zero-filled memfd of `size` bytes, sealed at that size, mapped
  // read-write. `name` shows in /proc/PID/maps only.
  static StatusOr<std::unique_ptr<SharedMapping>> Create(const std::string& name, size_t size);
  // Maps a memfd received from `peer` (takes ownership of `fd`): it must be
  // sealed against resizing and hold at least `min_size` bytes.
  static StatusOr<std::unique_ptr<SharedMapping>> Adopt(int fd, size_t min_size,
                                                        const std::string& peer);
  ~SharedMapping();
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  // The memfd's inode number (tells memfds apart while any maps them).
  uint64_t inode() const { return inode_; }
  void CloseFd();

 private:
  SharedMapping(int fd, uint8_t* data, size_t size, uint64_t inode)
      : fd_(fd), data_(data), size_(size), inode_(inode) {}
  int fd_;
  uint8_t* data_;
  size_t size_;
  uint64_t inode_;
};

// Keeps two counters that two processes write on separate cache lines.
struct alignas(64) PaddedU64 {
  std::atomic<uint64_t> value{0};
};
struct alignas(64) PaddedU32 {
  std::atomic<uint32_t> value{0};
};

// One direction of a connection: a single-producer single-consumer ring.
// head counts messages the producer published; tail counts messages whose
// handler has returned at the consumer. The producer may write while
// head - tail < slots: the free slots are its credits.
struct RingHeader {
  PaddedU64 head;
  PaddedU64 tail;
};

// The start of a connection segment. Side 0 is the lower rank (it creates
// the segment), side 1 the higher one. rings[s] carries messages from side s.
// sleeping[s] is set while side s's progress thread is about to block in
// epoll: whoever publishes a message or returns credits to it must then
// write its doorbell (eventfd).
struct SegmentHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t slots;
  uint32_t slot_size;
  PaddedU32 sleeping[2];
  RingHeader rings[2];
};

constexpr size_t kSegmentHeaderBytes = 4096;
static_assert(sizeof(SegmentHeader) <= kSegmentHeaderBytes, "segment header too big");

inline size_t SegmentSize(uint32_t slots, uint32_t slot_size) {
  return kSegmentHeaderBytes + 2 * size_t{slots} * slot_size;
}
// The slots of ring `side` inside a mapped segment.
inline uint8_t* RingSlots(uint8_t* segment, int side, uint32_t slots, uint32_t slot_size) {
  return segment + kSegmentHeaderBytes + size_t(side) * slots * slot_size;
}

// Region table (one per transport, mapped by every peer): open addressing
// keyed by rkey. Only the owner inserts and removes; peers look up and pin
// an entry (users) for the length of one copy. Every field is an atomic
// because a peer may read an entry while the owner rewrites it.
enum EntryState : uint32_t {
  kEntryEmpty = 0,
  kEntryValid = 1,
  kEntryRemoved = 2,  // tombstone, reusable
  kEntryLeaked = 3,   // a peer died holding it: never reused
};

struct RegionEntry {
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> users;
  std::atomic<uint32_t> rkey;
  std::atomic<uint32_t> access;
  std::atomic<uint64_t> address;
  std::atomic<uint64_t> length;
  // A region inside a memfd the owner allocated (AllocateRegistered,
  // AllocateShareable): the descriptor number in the owner's process (valid
  // while the entry is, so a peer holding a pin may take its own copy with
  // pidfd_getfd and map it), -1 otherwise; where the region starts in the
  // memfd; the memfd's inode number (one mapping per memfd in a peer,
  // however many regions it holds).
  std::atomic<int32_t> fd;
  uint32_t reserved;
  std::atomic<uint64_t> fd_offset;
  std::atomic<uint64_t> fd_inode;
  uint64_t reserved2;
};
static_assert(sizeof(RegionEntry) == 64, "region entry layout");

struct TableHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t capacity;  // a power of two
  uint32_t reserved;
};
constexpr size_t kTableHeaderBytes = 64;

inline size_t TableSize(uint32_t capacity) {
  return kTableHeaderBytes + size_t{capacity} * sizeof(RegionEntry);
}
inline RegionEntry* TableEntries(uint8_t* table) {
  return reinterpret_cast<RegionEntry*>(table + kTableHeaderBytes);
}
inline uint32_t TableSlot(uint32_t rkey, uint32_t capacity) {
  return (rkey * 2654435761u) & (capacity - 1);
}

}  // namespace shm
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SHM_SHM_SEGMENT_H_
