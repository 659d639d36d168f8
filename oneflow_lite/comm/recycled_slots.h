// The order in which a sender reuses a fixed set of buffers (slots) that a
// receiver frees in the order they were filled: the shm provider's message
// ring (shm_connection.h) and a ring collective's scratch slots at its
// neighbour (collective/ring.h). Taking the slot freed last keeps a stream
// of small transfers in one or a few buffers that are still cached at both
// ends; taking the one freed first is the plain ring's order (every slot in
// turn), kept for transfers too large to stay cached anyway.
// Header-only; not thread-safe.
#ifndef ONEFLOW_LITE_COMM_RECYCLED_SLOTS_H_
#define ONEFLOW_LITE_COMM_RECYCLED_SLOTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>

namespace oflite {
namespace comm {

class RecycledSlots {
 public:
  // Slots 0 .. slots - 1, all free; slot 0 counts as freed last.
  explicit RecycledSlots(uint32_t slots) {
    for (uint32_t slot = slots; slot > 0; --slot) free_.push_back(slot - 1);
  }

  bool HasFree() const { return !free_.empty(); }
  // The free slot freed last. Requires HasFree().
  uint32_t TakeFreedLast() { return Taken(TakeBack()); }
  // The free slot freed first (free the longest). Requires HasFree().
  uint32_t TakeFreedFirst() { return Taken(TakeFront()); }
  // The `count` slots taken earliest are free again, in the order they were
  // taken. Requires count <= InFlight().
  void Free(size_t count) {
    for (size_t i = 0; i < count; ++i) {
      free_.push_back(in_flight_.front());
      in_flight_.pop_front();
    }
  }
  // Slots taken and not freed yet.
  size_t InFlight() const { return in_flight_.size(); }

 private:
  uint32_t TakeBack() {
    const uint32_t slot = free_.back();
    free_.pop_back();
    return slot;
  }
  uint32_t TakeFront() {
    const uint32_t slot = free_.front();
    free_.pop_front();
    return slot;
  }
  uint32_t Taken(uint32_t slot) {
    in_flight_.push_back(slot);
    return slot;
  }

  std::deque<uint32_t> free_;       // freed last at the back
  std::deque<uint32_t> in_flight_;  // taken earliest at the front
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_RECYCLED_SLOTS_H_
