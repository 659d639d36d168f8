#include "oneflow_lite/comm/ibverbs/ibverbs_flags.h"

#include <cerrno>
#include <cstdlib>

#include "oneflow_lite/comm/verbs_emulator/emulator.h"

namespace oflite {
namespace comm {
namespace ibverbs {
namespace {

StatusOr<long long> ParseInteger(const std::string& name,
                                 const std::string& text, long long low,
                                 long long high) {
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < low ||
      value > high) {
    return InvalidArgumentError("--", name, "=", text, ": expected an integer in [",
                                low, ", ", high, "]");
  }
  return value;
}

StatusOr<bool> ParseBool(const std::string& name, const std::string& text) {
  if (text == "true" || text == "1" || text.empty()) return true;
  if (text == "false" || text == "0") return false;
  return InvalidArgumentError("--", name, "=", text,
                              ": expected true or false");
}

}  // namespace

const std::vector<IbverbsFlag>& IbverbsFlags() {
  static const std::vector<IbverbsFlag> kFlags = {
      {"ib_device", "RDMA device (see ibv_devices); empty: first ACTIVE port",
       "", false},
      {"ib_port", "port number of the RDMA device", "1", false},
      {"ib_gid_index",
       "GID index (see show_gids); -1: LID on InfiniBand, RoCE v2 IPv4 entry "
       "on RoCE",
       "-1", false},
      {"ib_queue_depth", "send-queue depth per peer queue pair", "128", false},
      {"ib_block_size", "largest RDMA READ/WRITE work request in bytes",
       "1048576", false},
      {"ib_ack_timeout", "ACK timeout exponent: 4.096 us << value", "14",
       false},
      {"ib_retry_count", "transport retries before a peer is declared lost",
       "7", false},
      {"ib_fork_safe", "call ibv_fork_init() before registering memory",
       "true", true},
  };
  return kFlags;
}

const IbverbsFlag& IbEmulatorFlag() {
  static const IbverbsFlag kFlag = {
      "ib_emulator",
      "for testing without RDMA hardware: run --comm ibverbs on the verbs "
      "emulator's fabric of this name (one per job and host) instead of "
      "libibverbs",
      "", false};
  return kFlag;
}

StatusOr<std::string> IbEmulatorFromFlag(const std::string& text) {
  if (!text.empty()) {
    RETURN_IF_ERROR(verbs::VerbsEmulator::CheckFabricName(text).WithContext(
        "--" + IbEmulatorFlag().name));
  }
  return text;
}

StatusOr<IbverbsOptions> IbverbsOptionsFromFlags(
    const std::map<std::string, std::string>& values) {
  IbverbsOptions options;
  for (const auto& [name, text] : values) {
    if (name == "ib_device") {
      options.device.device_name = text;
    } else if (name == "ib_port") {
      ASSIGN_OR_RETURN(long long port, ParseInteger(name, text, 1, 255));
      options.device.port = static_cast<int>(port);
    } else if (name == "ib_gid_index") {
      ASSIGN_OR_RETURN(long long index, ParseInteger(name, text, -1, 255));
      options.device.gid_index = static_cast<int>(index);
    } else if (name == "ib_queue_depth") {
      ASSIGN_OR_RETURN(long long depth, ParseInteger(name, text, 1, 1 << 16));
      options.queue_depth = static_cast<int>(depth);
    } else if (name == "ib_block_size") {
      ASSIGN_OR_RETURN(long long block, ParseInteger(name, text, 1, 1ll << 31));
      options.block_size = static_cast<size_t>(block);
    } else if (name == "ib_ack_timeout") {
      ASSIGN_OR_RETURN(long long timeout, ParseInteger(name, text, 1, 31));
      options.ack_timeout = static_cast<uint8_t>(timeout);
    } else if (name == "ib_retry_count") {
      ASSIGN_OR_RETURN(long long retries, ParseInteger(name, text, 0, 7));
      options.retry_count = static_cast<uint8_t>(retries);
    } else if (name == "ib_fork_safe") {
      ASSIGN_OR_RETURN(options.fork_safe, ParseBool(name, text));

    } else {
      return InvalidArgumentError("unknown ibverbs flag --", name);
    }
  }
  return options;
}

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
