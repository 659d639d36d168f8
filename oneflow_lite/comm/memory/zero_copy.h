// Strategy (3): static zero-copy. For registers whose size the plan fixes,
// every cross-machine register is registered once (at plan load) and its
// RemoteKey published; the consumer pulls a produced register with one
// one-sided READ straight into its own registered register. No CPU copy and
// no registration on the hot path: the counters show registrations only at
// load time and bytes_copied == 0.
//
// StaticRegisterSet owns the registrations (RAII) of named buffers the
// caller owns. Thread-safe after loading; Register is not concurrent-safe
// with Find.
#ifndef ONEFLOW_LITE_COMM_MEMORY_ZERO_COPY_H_
#define ONEFLOW_LITE_COMM_MEMORY_ZERO_COPY_H_

#include <map>
#include <memory>
#include <string>

#include "oneflow_lite/comm/memory/counters.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

class StaticRegisterSet {
 public:
  StaticRegisterSet(Transport* transport, StrategyCounters* counters)
      : transport_(transport), counters_(counters) {}

  // Registers `size` bytes at `data` under `name` (unique).
  Status Register(const std::string& name, void* data, size_t size);
  // The region registered under `name`, or NotFound.
  StatusOr<const MemoryRegion*> Find(const std::string& name) const;
  size_t count() const { return regions_.size(); }

 private:
  Transport* const transport_;
  StrategyCounters* const counters_;
  std::map<std::string, std::unique_ptr<MemoryRegion>> regions_;
};

// Pulls `length` bytes of the producer's register (`producer`, from its
// StaticRegisterSet) into `destination` at `offset` with one READ; blocks
// until done or `deadline`.
Status PullRegister(Connection* connection, const RemoteKey& producer,
                    const MemoryRegion& destination, size_t offset,
                    size_t length, Deadline deadline,
                    StrategyCounters* counters);

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_MEMORY_ZERO_COPY_H_
