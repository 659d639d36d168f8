// ThreadSanitizer cannot see the synchronization of the shm rings when both
// ends live in one process (the tests): each end maps the segment at its own
// address, so the producer's release store and the consumer's acquire load
// hit different addresses. These hooks tell it about the edge, keyed by a
// value both ends compute (the pair's nonces and the ring). No-ops in other
// builds, and meaningless across processes (tsan is per process anyway).
#ifndef ONEFLOW_LITE_COMM_SHM_SHM_TSAN_H_
#define ONEFLOW_LITE_COMM_SHM_SHM_TSAN_H_

#include <cstdint>

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* address);
extern "C" void __tsan_release(void* address);
#endif

namespace oflite {
namespace comm {
namespace shm {

#if defined(__SANITIZE_THREAD__)
inline void* TsanSyncAddress(uint64_t key) {
  static char addresses[4096];
  return &addresses[(key * 0x9E3779B97F4A7C15ull) >> 52];
}
inline void TsanRelease(uint64_t key) { __tsan_release(TsanSyncAddress(key)); }
inline void TsanAcquire(uint64_t key) { __tsan_acquire(TsanSyncAddress(key)); }
#else
inline void TsanRelease(uint64_t) {}
inline void TsanAcquire(uint64_t) {}
#endif

}  // namespace shm
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SHM_SHM_TSAN_H_
