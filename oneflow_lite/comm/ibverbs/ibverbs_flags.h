// The --ib_* command-line flags of the ibverbs provider, as data: the CLI
// (tools/oflite) adds them to its flag set and hands the parsed strings back
// here. No global flag state; parsing is a pure function.
//
//   --ib_device=NAME      HCA to use (ibv_devices); empty: first ACTIVE port
//   --ib_port=N           port of that HCA (default 1)
//   --ib_gid_index=N      GID table entry (show_gids); -1: LID on InfiniBand,
//                         the IPv4-mapped (RoCE v2) entry on RoCE
//   --ib_queue_depth=N    send-queue depth per peer QP (default 128)
//   --ib_block_size=BYTES largest READ/WRITE work request (default 1 MiB)
//   --ib_ack_timeout=N    ACK timeout exponent, 4.096 us << N (default 14)
//   --ib_retry_count=N    transport retries 0..7 (default 7)
//   --ib_fork_safe=BOOL   call ibv_fork_init() first (default true)
// and, apart (IbEmulatorFlag, not an IbverbsOptions field):
//   --ib_emulator=FABRIC  testing without RDMA hardware: instead of
//                         libibverbs, join the verbs emulator's host-wide
//                         fabric FABRIC with one emulated device per rank
//                         (verbs_emulator/emulator.h); empty (default): libibverbs.
//                         The caller passes it to
//                         BuiltinProviderOptions::ib_emulator.
// docs/rdma.md explains how to choose each on a real cluster.
#ifndef ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_FLAGS_H_
#define ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_FLAGS_H_

#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {
namespace ibverbs {

struct IbverbsFlag {
  std::string name;  // without dashes, e.g. "ib_gid_index"
  std::string help;
  std::string default_value;
  bool is_bool = false;
};

const std::vector<IbverbsFlag>& IbverbsFlags();

// --ib_emulator, and its value checked: empty, or a fabric name
// (InvalidArgument naming the flag otherwise).
const IbverbsFlag& IbEmulatorFlag();
StatusOr<std::string> IbEmulatorFromFlag(const std::string& text);

// Builds options from flag values by name (absent names keep defaults).
// InvalidArgument naming the flag for an unknown name or a bad value.
StatusOr<IbverbsOptions> IbverbsOptionsFromFlags(
    const std::map<std::string, std::string>& values);

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_FLAGS_H_
