// Counters for the three registered-memory strategies (docs/comm.md):
// bytes moved over the network, bytes copied by the CPU, registrations made
// and transfers done. Atomic; safe to bump from any thread. One CommStats per
// process (owned by whoever owns the transport), passed to each strategy.
#ifndef ONEFLOW_LITE_COMM_MEMORY_COUNTERS_H_
#define ONEFLOW_LITE_COMM_MEMORY_COUNTERS_H_

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>

namespace oflite {
namespace comm {

struct StrategyCounters {
  std::atomic<uint64_t> bytes_moved{0};
  std::atomic<uint64_t> bytes_copied{0};
  std::atomic<uint64_t> registrations{0};
  std::atomic<uint64_t> transfers{0};

  std::string ToString(const std::string& name) const {
    std::ostringstream text;
    text << name << ": moved " << bytes_moved << " B, copied " << bytes_copied
         << " B, registrations " << registrations << ", transfers "
         << transfers;
    return text.str();
  }
};

struct CommStats {
  StrategyCounters pool;       // (1) registered pool
  StrategyCounters bounce;     // (2) bounce buffers
  StrategyCounters zero_copy;  // (3) static zero-copy

  std::string Summary() const {
    return pool.ToString("registered-pool") + "\n" +
           bounce.ToString("bounce-buffers") + "\n" +
           zero_copy.ToString("static-zero-copy");
  }
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_MEMORY_COUNTERS_H_
