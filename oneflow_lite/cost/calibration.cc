#include "oneflow_lite/cost/calibration.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "oneflow_lite/common/ring_segments.h"

namespace oflite {
namespace cost {

namespace {

bool BadTime(double v) { return !std::isfinite(v) || v < 0; }

std::string OpKey(const std::string& op_type, DeviceType device, int threads) {
  return op_type + "|" + std::to_string(static_cast<int>(device)) + "|" + std::to_string(threads);
}

}  // namespace

Status ValidateCalibration(const Calibration& calibration, const std::string& source) {
  if (calibration.version() != 1) {
    return InvalidArgumentError("calibration '", source, "': version ", calibration.version(),
                                ", expected 1 (write it again with `oflite profile`)");
  }
  const RuntimeCost& rt = calibration.runtime();
  if (BadTime(rt.act_us()) || BadTime(rt.message_us()) || BadTime(rt.copy_gbyte_per_s()) ||
      BadTime(rt.in_situ_act_us()) || BadTime(rt.busy_core_wakeup_us()) ||
      BadTime(rt.core_slice_us()) || BadTime(rt.cache_bytes())) {
    return InvalidArgumentError("calibration '", source,
                                "': runtime has a negative or non-finite figure");
  }
  std::set<std::string> keys;
  for (int i = 0; i < calibration.kernel_size(); ++i) {
    const KernelCost& k = calibration.kernel(i);
    if (k.key().empty()) {
      return InvalidArgumentError("calibration '", source, "': kernel[", i, "] has no key");
    }
    if (BadTime(k.us())) {
      return InvalidArgumentError("calibration '", source, "': kernel '", k.key(),
                                  "' has time ", k.us(), " us");
    }
    if (BadTime(k.in_situ_us())) {
      return InvalidArgumentError("calibration '", source, "': kernel '", k.key(),
                                  "' has in-situ time ", k.in_situ_us(), " us");
    }
    if (BadTime(k.cold_us())) {
      return InvalidArgumentError("calibration '", source, "': kernel '", k.key(),
                                  "' has cold time ", k.cold_us(), " us");
    }
    if (k.elements() < 0) {
      return InvalidArgumentError("calibration '", source, "': kernel '", k.key(),
                                  "' has negative elements");
    }
    if (!keys.insert(k.key()).second) {
      return InvalidArgumentError("calibration '", source, "': kernel '", k.key(),
                                  "' appears twice");
    }
  }
  for (const InSituFactor& f : calibration.in_situ_factor()) {
    if (!std::isfinite(f.factor()) || f.factor() <= 0) {
      return InvalidArgumentError("calibration '", source, "': in-situ factor of '", f.op_type(),
                                  "' is ", f.factor(), " (must be > 0)");
    }
  }
  for (const TransportCost& t : calibration.transport()) {
    if (BadTime(t.cpu_ns_per_byte())) {
      return InvalidArgumentError("calibration '", source, "': transport '", t.name(),
                                  "' has cpu_ns_per_byte ", t.cpu_ns_per_byte());
    }
    if (BadTime(t.busy_message_us())) {
      return InvalidArgumentError("calibration '", source, "': transport '", t.name(),
                                  "' has busy_message_us ", t.busy_message_us());
    }
    if (t.name().empty()) {
      return InvalidArgumentError("calibration '", source, "': a transport has no name");
    }
    if (BadTime(t.latency_us()) || BadTime(t.gbyte_per_s())) {
      return InvalidArgumentError("calibration '", source, "': transport '", t.name(),
                                  "' has a negative or non-finite figure");
    }
    for (const CollectiveCurve& c : t.collective()) {
      if (c.ranks() < 2) {
        return InvalidArgumentError("calibration '", source, "': transport '", t.name(),
                                    "': a ", CollectiveAlgorithm_Name(c.algorithm()),
                                    " curve has ranks ", c.ranks(), " (at least 2)");
      }
      for (int i = 0; i < c.point_size(); ++i) {
        if (c.point(i).bytes() <= 0 || BadTime(c.point(i).us()) ||
            (i > 0 && c.point(i).bytes() <= c.point(i - 1).bytes())) {
          return InvalidArgumentError("calibration '", source, "': transport '", t.name(), "': ",
                                      CollectiveAlgorithm_Name(c.algorithm()), " at ",
                                      c.ranks(), " ranks: point ", i,
                                      " is not a positive size above the previous one with a "
                                      "finite time");
        }
      }
    }
  }
  return Status::OK();
}

CollectiveTraffic TrafficOf(CollectiveAlgorithm algorithm, int ranks, int64_t bytes,
                            int64_t part_bytes) {
  CollectiveTraffic t;
  const double n = std::max(1, ranks);
  const double b = static_cast<double>(bytes);
  if (ranks <= 1) return t;
  switch (algorithm) {
    case COLLECTIVE_RING_ALL_REDUCE:
      t.bytes_sent_per_rank = 2 * (n - 1) / n * b;
      t.latencies = 2 * (ranks - 1);
      t.messages_received_per_rank = t.latencies;
      break;
    case COLLECTIVE_RING_REDUCE_SCATTER:
    case COLLECTIVE_RING_ALL_GATHER:
      t.bytes_sent_per_rank = (n - 1) / n * b;
      t.latencies = ranks - 1;
      t.messages_received_per_rank = t.latencies;
      break;
    case COLLECTIVE_EXCHANGE_ALL_REDUCE:
      t.bytes_sent_per_rank = (n - 1) * b;
      t.latencies = 1;
      t.messages_received_per_rank = ranks - 1;
      break;
    case COLLECTIVE_DOUBLING_ALL_REDUCE: {
      int rounds = 0;
      while ((1 << rounds) < ranks) ++rounds;
      t.bytes_sent_per_rank = rounds * b;
      t.latencies = rounds;
      t.messages_received_per_rank = rounds;
      break;
    }
    case COLLECTIVE_SCATTER_GATHER_ALL_REDUCE:
      t.bytes_sent_per_rank = 2 * (n - 1) / n * b;
      t.latencies = 2;
      t.messages_received_per_rank = 2 * (ranks - 1);
      break;
    default:  // all-to-all: every rank's part to every other rank
      t.bytes_sent_per_rank = (n - 1) * static_cast<double>(part_bytes);
      t.latencies = 1;
      t.messages_received_per_rank = ranks - 1;
      break;
  }
  return t;
}

CostTables::CostTables(const Calibration& calibration) : runtime_(calibration.runtime()) {
  for (const InSituFactor& f : calibration.in_situ_factor()) {
    if (f.factor() > 0) factor_[OpKey(f.op_type(), f.device_type(), f.threads())] = f.factor();
  }
  for (const KernelCost& k : calibration.kernel()) {
    by_key_[k.key()] = {k.elements(), k.us(), k.cold_us()};
    if (k.in_situ_us() > 0) in_situ_by_key_[k.key()] = k.in_situ_us();
    by_op_[OpKey(k.op_type(), k.device_type(), k.threads())].push_back(
        {k.elements(), k.us(), k.cold_us()});
  }
  transports_.assign(calibration.transport().begin(), calibration.transport().end());
}

KernelTime CostTables::Kernel(const std::string& key, const std::string& op_type,
                              DeviceType device, int threads, int64_t elements) const {
  auto in_situ = in_situ_by_key_.find(key);
  if (in_situ != in_situ_by_key_.end()) return {in_situ->second, KernelTimeSource::kMeasured};
  auto f = factor_.find(OpKey(op_type, device, threads));
  const double op_factor = f == factor_.end() ? 1.0 : f->second;
  // A kernel with a cold time, where the caches' size is known: its warm
  // time, and the cold extra the simulator charges by the share of its
  // tensors out of cache. The op type's in-situ factor is for the others
  // (small kernels, whose time in a run the runtime's own work around them
  // and the inner caches set); for a large one what a run adds is mostly
  // the caches, which the extra already counts.
  const bool cache_model = runtime_.cache_bytes() > 0;
  auto time = [&](const Measured& m, double scale, KernelTimeSource source) -> KernelTime {
    if (cache_model && m.cold_us > 0) {
      return {m.us * scale, source, std::max(0.0, (m.cold_us - m.us) * scale)};
    }
    return {m.us * scale * op_factor, source, 0.0};
  };
  auto exact = by_key_.find(key);
  if (exact != by_key_.end()) return time(exact->second, 1, KernelTimeSource::kMeasured);
  auto same = by_op_.find(OpKey(op_type, device, threads));
  if (same == by_op_.end() || same->second.empty()) return {};
  // Nearest in log(elements); time scales with elements (bandwidth-bound
  // kernels exactly, compute-bound ones roughly).
  const Measured* best = nullptr;
  double best_dist = 0;
  const double e = std::log(std::max<int64_t>(1, elements));
  for (const Measured& m : same->second) {
    double dist = std::fabs(std::log(std::max<int64_t>(1, m.elements)) - e);
    if (best == nullptr || dist < best_dist) {
      best = &m;
      best_dist = dist;
    }
  }
  double scale = static_cast<double>(std::max<int64_t>(1, elements)) /
                 static_cast<double>(std::max<int64_t>(1, best->elements));
  return time(*best, scale, KernelTimeSource::kEstimated);
}

const TransportCost* CostTables::transport(const std::string& name) const {
  for (const TransportCost& t : transports_) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

bool IsRingAlgorithm(CollectiveAlgorithm algorithm) {
  return algorithm == COLLECTIVE_RING_ALL_REDUCE || algorithm == COLLECTIVE_RING_REDUCE_SCATTER ||
         algorithm == COLLECTIVE_RING_ALL_GATHER;
}

namespace {

// `transport`'s curve of `algorithm` at `ranks` ranks with points (the
// last one listed), or null. Points ascend in bytes.
const CollectiveCurve* CurveOf(const TransportCost& transport, CollectiveAlgorithm algorithm,
                               int ranks) {
  const CollectiveCurve* found = nullptr;
  for (const CollectiveCurve& c : transport.collective()) {
    if (c.algorithm() == algorithm && c.ranks() == ranks && c.point_size() > 0) found = &c;
  }
  return found;
}

}  // namespace

int64_t CollectiveCurveMaxBytes(const TransportCost& transport, CollectiveAlgorithm algorithm,
                                int ranks) {
  const CollectiveCurve* curve = CurveOf(transport, algorithm, ranks);
  return curve == nullptr ? -1 : curve->point(curve->point_size() - 1).bytes();
}

double CostTables::CollectiveFloorUs(const TransportCost& transport,
                                     CollectiveAlgorithm algorithm, int ranks,
                                     int64_t bytes) const {
  // Only a curve measured at this rank count: a curve of fewer ranks does
  // not say how the transport's software grows with more (a ring's bytes
  // per rank stay about twice the tensor while its steps grow), so other
  // counts fall back to the latency and stream-rate model.
  const CollectiveCurve* best = CurveOf(transport, algorithm, ranks);
  if (best == nullptr) return -1;
  const auto& p = best->point();
  double x = static_cast<double>(std::max<int64_t>(1, bytes));
  double us;
  if (x <= p[0].bytes()) {
    us = p[0].us();  // below the smallest measured size: latency-bound
  } else if (x >= p[p.size() - 1].bytes()) {
    int last = p.size() - 1;
    if (last == 0) {
      us = p[0].us() * x / p[0].bytes();
    } else {
      // Linear in bytes beyond the range, with the last segment's slope.
      double slope = (p[last].us() - p[last - 1].us()) /
                     static_cast<double>(p[last].bytes() - p[last - 1].bytes());
      us = p[last].us() + std::max(0.0, slope) * (x - p[last].bytes());
    }
  } else {
    int i = 1;
    while (p[i].bytes() < x) ++i;
    double lx0 = std::log(static_cast<double>(p[i - 1].bytes()));
    double lx1 = std::log(static_cast<double>(p[i].bytes()));
    double ly0 = std::log(std::max(1e-3, p[i - 1].us()));
    double ly1 = std::log(std::max(1e-3, p[i].us()));
    double f = (std::log(x) - lx0) / (lx1 - lx0);
    us = std::exp(ly0 + f * (ly1 - ly0));
  }
  return us;
}

double CostTables::TransportCpuNsPerByte(const TransportCost& transport) {
  if (transport.cpu_ns_per_byte() > 0) return transport.cpu_ns_per_byte();
  return transport.gbyte_per_s() > 0 ? 1.0 / transport.gbyte_per_s() : 0.0;
}

double CostTables::CopyUs(int64_t bytes) const {
  double gbs = runtime_.copy_gbyte_per_s() > 0 ? runtime_.copy_gbyte_per_s() : 5.0;
  return static_cast<double>(bytes) / (gbs * 1e3);
}

LinkSpec LinkBetween(const ClusterProto& cluster, int64_t a, int64_t b, double override_gbit,
                     double override_latency_us) {
  LinkSpec spec;
  bool found = false;
  for (const LinkProto& link : cluster.link()) {
    if ((link.machine_a() == a && link.machine_b() == b) ||
        (link.machine_a() == b && link.machine_b() == a)) {
      spec = link.spec();
      found = true;
      break;
    }
  }
  if (!found) {
    const MachineProto* ma = nullptr;
    const MachineProto* mb = nullptr;
    for (const MachineProto& m : cluster.machine()) {
      if (m.id() == a) ma = &m;
      if (m.id() == b) mb = &m;
    }
    double ga = ma ? ma->nic().gbit_per_s() : 0;
    double gb = mb ? mb->nic().gbit_per_s() : 0;
    if (ga > 0 && gb > 0) {
      spec.set_gbit_per_s(std::min(ga, gb));
    } else {
      spec.set_gbit_per_s(std::max(ga, gb));
    }
    spec.set_latency_us(std::max(ma ? ma->nic().latency_us() : 0.0, mb ? mb->nic().latency_us() : 0.0));
    spec.set_cpu_ns_per_byte(std::max(ma ? ma->nic().cpu_ns_per_byte() : 0.0,
                                      mb ? mb->nic().cpu_ns_per_byte() : 0.0));
  }
  if (override_gbit >= 0) spec.set_gbit_per_s(override_gbit);
  if (override_latency_us >= 0) spec.set_latency_us(override_latency_us);
  return spec;
}

double PredictCollectiveUs(const CostTables& tables, const TransportCost* transport,
                           const LinkSpec& link, CollectiveAlgorithm algorithm, int ranks,
                           int64_t bytes) {
  if (transport == nullptr) return -1;
  if (!IsRingAlgorithm(algorithm)) {
    // Whole-buffer messages, not chunks: past its measured sizes nothing
    // says how an algorithm's transfers and reductions overlap.
    const int64_t measured = CollectiveCurveMaxBytes(*transport, algorithm, ranks);
    if (measured > 0 && bytes > measured) return -1;
  }
  CollectiveTraffic traffic = TrafficOf(algorithm, ranks, bytes, bytes / std::max(1, ranks));
  double floor = tables.CollectiveFloorUs(*transport, algorithm, ranks, bytes);
  if (floor < 0) {
    floor = traffic.latencies * transport->latency_us() +
            (transport->gbyte_per_s() > 0
                 ? traffic.bytes_sent_per_rank / (transport->gbyte_per_s() * 1e3)
                 : 0);
  }
  double wire = traffic.latencies * link.latency_us() +
                (link.gbit_per_s() > 0 ? traffic.bytes_sent_per_rank / (link.gbit_per_s() * 125.0)
                                       : 0);
  return std::max(floor, wire);
}

double StatedLinkCollectiveUs(const LinkSpec& link, int64_t exchange_max_bytes,
                              CollectiveAlgorithm algorithm, int ranks, int64_t bytes) {
  if (link.gbit_per_s() <= 0 || exchange_max_bytes <= 0 || ranks < 2 || bytes < 0) return -1;
  const size_t size = static_cast<size_t>(bytes);
  const size_t bound = static_cast<size_t>(exchange_max_bytes);
  // The size rule's pick for an all-reduce (collective_choice.h).
  const CollectiveAlgorithm rule =
      UseDoublingAllReduce(size, ranks, bound)        ? COLLECTIVE_DOUBLING_ALL_REDUCE
      : UseExchangeAllReduce(size, ranks, bound)      ? COLLECTIVE_EXCHANGE_ALL_REDUCE
      : UseScatterGatherAllReduce(size, ranks, bound) ? COLLECTIVE_SCATTER_GATHER_ALL_REDUCE
                                                      : COLLECTIVE_RING_ALL_REDUCE;
  const CollectiveTraffic traffic = TrafficOf(algorithm, ranks, bytes, bytes / ranks);
  if (algorithm != rule) {
    // Only a ring algorithm or scatter-gather may beat the rule's pick, and
    // only by sending fewer bytes (scatter-gather then lies within its own
    // bound: the rule took doubling or the exchange, both below it).
    const bool challenger =
        IsRingAlgorithm(algorithm) || algorithm == COLLECTIVE_SCATTER_GATHER_ALL_REDUCE;
    const CollectiveTraffic ruled = TrafficOf(rule, ranks, bytes, bytes / ranks);
    if (!challenger || traffic.bytes_sent_per_rank >= ruled.bytes_sent_per_rank) return -1;
  }
  return traffic.latencies * (link.latency_us() + kStatedLinkStepUs) +
         traffic.messages_received_per_rank * kStatedLinkMessageUs +
         traffic.bytes_sent_per_rank / (link.gbit_per_s() * 125.0);
}

LinkSpec SlowestLink(const ClusterProto& cluster) {
  LinkSpec slowest;
  bool first = true;
  for (int i = 0; i < cluster.machine_size(); ++i) {
    for (int j = i + 1; j < cluster.machine_size(); ++j) {
      LinkSpec l = LinkBetween(cluster, cluster.machine(i).id(), cluster.machine(j).id(), -1, -1);
      bool slower = l.gbit_per_s() > 0 &&
                    (slowest.gbit_per_s() <= 0 || l.gbit_per_s() < slowest.gbit_per_s());
      if (first || slower) slowest.set_gbit_per_s(l.gbit_per_s());
      slowest.set_latency_us(std::max(slowest.latency_us(), l.latency_us()));
      first = false;
    }
  }
  return slowest;
}

StatusOr<std::vector<int>> ParseCpuSet(const std::string& text, const std::string& what) {
  std::vector<int> cores;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() : comma + 1;
    size_t dash = item.find('-');
    char* end = nullptr;
    long lo = std::strtol(item.c_str(), &end, 10);
    bool ok = !item.empty() && end != item.c_str() && lo >= 0;
    long hi = lo;
    if (ok && dash != std::string::npos) {
      const char* rest = item.c_str() + dash + 1;
      hi = std::strtol(rest, &end, 10);
      ok = end != rest && *end == '\0' && hi >= lo;
    } else if (ok) {
      ok = *end == '\0';
    }
    if (!ok || hi > 4095) {
      return InvalidArgumentError(what, ": '", text, "' is not a cpu list (e.g. 0-1,3)");
    }
    for (long c = lo; c <= hi; ++c) cores.push_back(static_cast<int>(c));
  }
  std::sort(cores.begin(), cores.end());
  cores.erase(std::unique(cores.begin(), cores.end()), cores.end());
  return cores;
}

}  // namespace cost
}  // namespace oflite
