// The multi-machine flags of the subcommands that run a plan on every rank
// (`oflite eval`, `oflite predict`; `oflite run` has the same flags) and
// the MultiMachineSession they start.
//
// SessionFlagSpecs: --rank, --master, --comm, --ring-timeout-seconds,
// --join-grace-seconds and
// the ibverbs provider's --ib_* flags. ReadSessionFlags checks them against
// the plan before anything starts (every error InvalidArgument naming the
// flag: exit 2): the rank is --rank, else RANK, SLURM_PROCID,
// OMPI_COMM_WORLD_RANK, else 0, and must name a machine of the plan; a
// plan with several machines needs --master HOST:PORT. StartSession joins
// the job (the job token from OFLITE_JOB_TOKEN and this node's address
// from OFLITE_HOST, read here, not in the libraries); `on_fatal` is the
// session's (multi_machine.h). PermissionDenied (a wrong job token) is
// this rank's bad input. Blocking (rendezvous, bounded by the session's
// connect timeout); not thread-safe.
#ifndef TOOLS_OFLITE_SESSION_SETUP_H_
#define TOOLS_OFLITE_SESSION_SETUP_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "proto/plan.pb.h"
#include "tools/oflite/flags.h"

namespace oflite {
namespace cli {

std::vector<FlagSpec> SessionFlagSpecs();

// This node's rank: --rank, else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK,
// else 0; it must name a machine of `plan` (InvalidArgument naming the flag
// or variable otherwise). Shared with `oflite run`.
StatusOr<int64_t> ResolveRank(const FlagSet& flags, const Plan& plan);

// --comm names a registered provider, and a multi-machine plan has a
// parseable --master HOST:PORT (MultiMachineSession::Start would refuse
// them later with exit 1; here they are bad input naming the flag). Shared
// with `oflite run`.
Status CheckMultiMachineFlags(const FlagSet& flags, const Plan& plan);

struct SessionFlags {
  int64_t rank = 0;
  std::chrono::milliseconds ring_timeout{120000};
  std::chrono::milliseconds join_grace{5000};
};

// The help of --join-grace-seconds (`oflite run`, `eval`, `predict`).
inline constexpr char kJoinGraceHelp[] =
    "rank 0: after refusing a wrong-token join claiming rank R, wait this long for the "
    "genuine rank R before failing the job";

StatusOr<SessionFlags> ReadSessionFlags(const FlagSet& flags, const Plan& plan);

// Null for a one-machine plan (nothing to join). `command` prefixes the
// provider's notes ("oflite eval: rank R: ...").
StatusOr<std::unique_ptr<MultiMachineSession>> StartSession(
    const FlagSet& flags, const Plan& plan, const SessionFlags& session_flags,
    const std::string& command, std::function<void(const JobFailure&)> on_fatal);

// The failure the session attributes the end of this rank's run to. A run
// that failed with UNAVAILABLE (a connection to a peer lost) may see the
// connection's sticky error a moment before the transport reports the
// loss to the session, so then this waits up to 500 ms for that report:
// the exit code names the lost peer (4) instead of blaming this rank (1).
// Returns at once for any other status, or with rank -1 when nothing is
// attributed. `session` may be null.
JobFailure AttributeFailure(const MultiMachineSession* session, const Status& status);

}  // namespace cli
}  // namespace oflite

#endif  // TOOLS_OFLITE_SESSION_SETUP_H_
