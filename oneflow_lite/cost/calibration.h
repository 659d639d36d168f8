// A calibration (proto/calibration.proto) as the simulator reads it: kernel
// times by key, the runtime's own costs, each transport's software costs and
// collective curves, and the link model of a cluster. docs/simulate.md.
#ifndef ONEFLOW_LITE_COST_CALIBRATION_H_
#define ONEFLOW_LITE_COST_CALIBRATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/calibration.pb.h"
#include "proto/cluster.pb.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace cost {

// Checks a calibration read from a file (named `source` in errors): version
// 1, no negative or non-finite time, no duplicate kernel key, curves
// ascending. A user edits these files by hand, so every field is checked.
Status ValidateCalibration(const Calibration& calibration, const std::string& source);

// How a kernel's time was found.
enum class KernelTimeSource { kMeasured, kEstimated, kMissing };

struct KernelTime {
  double us = 0;
  KernelTimeSource source = KernelTimeSource::kMissing;
  // What the kernel takes beyond `us` when its tensors come from memory
  // (KernelCost.cold_us less `us`, never below 0); 0 for a kernel timed in
  // a run (its in-situ time already met the caches as a run leaves them)
  // or without a cold time.
  double cold_extra_us = 0;
};

// Bytes one rank sends and the number of message latencies on its path, for
// one collective of `algorithm` over `ranks` ranks on a tensor of `bytes`
// (the logical tensor: all-reduce input; for all-to-all, `part_bytes` is what
// each rank holds).
struct CollectiveTraffic {
  double bytes_sent_per_rank = 0;
  int latencies = 0;
  // The pieces one rank receives (one per step of a ring, one from each
  // peer in each step of the exchange family): what it pays
  // TransportCost.busy_message_us for. Chunks of one piece are not counted.
  int messages_received_per_rank = 0;
};
CollectiveTraffic TrafficOf(CollectiveAlgorithm algorithm, int ranks, int64_t bytes,
                            int64_t part_bytes);

class CostTables {
 public:
  explicit CostTables(const Calibration& calibration);

  // Measured time of `key` (its in-situ time when the calibration has one,
  // else its isolated time times its op type's in-situ factor); else an
  // estimate from the measured kernel of the same op type, device and
  // threads whose element count is nearest (scaled by elements, and by the
  // factor); else missing (0).
  KernelTime Kernel(const std::string& key, const std::string& op_type, DeviceType device,
                    int threads, int64_t elements) const;

  const RuntimeCost& runtime() const { return runtime_; }
  // The transport named `name`, or nullptr.
  const TransportCost* transport(const std::string& name) const;
  // The software's time of one collective on `transport` (its measured
  // curve for the algorithm at this rank count, interpolated in log-log and
  // extended linearly beyond the measured sizes), or -1 when there is no
  // such curve (callers then use the transport's latency and stream rate).
  double CollectiveFloorUs(const TransportCost& transport, CollectiveAlgorithm algorithm,
                           int ranks, int64_t bytes) const;
  // Host copy time of `bytes` on one thread.
  double CopyUs(int64_t bytes) const;
  // CPU nanoseconds per byte `transport` spends at each end: its
  // cpu_ns_per_byte, else one core per its stream rate.
  static double TransportCpuNsPerByte(const TransportCost& transport);

 private:
  struct Measured {
    int64_t elements;
    double us;
    double cold_us;
  };
  RuntimeCost runtime_;
  std::map<std::string, Measured> by_key_;
  std::map<std::string, double> in_situ_by_key_;
  // (op type | device | threads) -> in-situ factor.
  std::map<std::string, double> factor_;
  // (op type | device | threads) -> measured kernels.
  std::map<std::string, std::vector<Measured>> by_op_;
  std::vector<TransportCost> transports_;
};

// The link model between two machines of `cluster`: its LinkProto entry if
// any, else the slower NIC and larger latency of the two (0 gbit: none
// stated, no link limit). `override_gbit` / `override_latency_us` >= 0
// replace every link's figure (what-if runs).
LinkSpec LinkBetween(const ClusterProto& cluster, int64_t a, int64_t b, double override_gbit,
                     double override_latency_us);

// True for the ring algorithms (all-reduce, reduce-scatter, all-gather),
// which move a tensor in chunks that pipeline transfer and reduction.
bool IsRingAlgorithm(CollectiveAlgorithm algorithm);

// The largest size `transport`'s curves measured `algorithm` at over
// `ranks` ranks; -1 when it has no such curve.
int64_t CollectiveCurveMaxBytes(const TransportCost& transport, CollectiveAlgorithm algorithm,
                                int ranks);

// The time of one collective with nothing else on the links: the later of
// the transport's measured floor (its curve for the algorithm, else its
// latency and stream rate) and the link's share (each rank's bytes at the
// link rate plus a link latency per step). -1 without `transport`, and -1
// for an algorithm other than a ring above the largest size its curve at
// this rank count measured: those send whole buffers, and past the curve
// nothing measured says how their transfers and reductions overlap (the
// ring's chunks pipeline them). On 2 namespace hosts the MLP's 6.4 and
// 16.8 MB gradients took the exchange where its curve (measured to 4 MiB),
// extrapolated, tied the ring on the link, and the steps were 2-16 %
// slower than with the ring (docs/simulate.md, "Collectives from the
// curves").
double PredictCollectiveUs(const CostTables& tables, const TransportCost* transport,
                           const LinkSpec& link, CollectiveAlgorithm algorithm, int ranks,
                           int64_t bytes);

// Without a calibration, across links the cluster states: the time of one
// collective by the link alone, for the compiler to weigh the size rule's
// pick (common/ring_segments.h) against the algorithms that send fewer
// bytes than it, as `oflite compile` does without --calibration
// (compiler/compiler.h):
//   latencies x (link latency + kStatedLinkStepUs)
//   + messages received x kStatedLinkMessageUs
//   + bytes sent per rank at the link's rate.
// The size rule was measured on one box, where bytes are cheap and
// messages dear; across a slow link the bytes decide: at 4 ranks recursive
// doubling (twice the tensor sent per rank) loses to scatter-gather (1.5
// times, four more messages) above about 10 KB at 1 Gbit/s and 100 KB at
// 10 Gbit/s, and at 3 ranks the exchange (twice) to scatter-gather (4/3)
// above about 7 and 70 KB. -1 when the link has no stated rate,
// `exchange_max_bytes` is 0 (the ring only), or `algorithm` is neither the
// rule's pick nor one that sends fewer bytes (scatter-gather within its
// bound, the ring algorithms): the rule's preference among the rest was
// measured, and a link cannot reverse it.
inline constexpr double kStatedLinkStepUs = 10;     // tcp's one-way software latency
inline constexpr double kStatedLinkMessageUs = 10;  // one more piece received
double StatedLinkCollectiveUs(const LinkSpec& link, int64_t exchange_max_bytes,
                              CollectiveAlgorithm algorithm, int ranks, int64_t bytes);

// The slowest link between any two machines of `cluster` (the one a ring
// over all of them waits for).
LinkSpec SlowestLink(const ClusterProto& cluster);

// Cores of a cpu list ("0-1,3"); InvalidArgument naming `what` if malformed.
StatusOr<std::vector<int>> ParseCpuSet(const std::string& text, const std::string& what);

}  // namespace cost
}  // namespace oflite

#endif  // ONEFLOW_LITE_COST_CALIBRATION_H_
