// How one node takes part in a job: the options every program that runs a
// plan shares (`oflite run`, `eval`, `predict`, the training driver's
// programs), the one flag spec they declare, and where each value comes
// from.
//
// NodeFlagSpecs() is the flag spec: --rank, --master, --comm, --host_id,
// --ring-timeout-seconds, --join-grace-seconds, --watchdog-seconds,
// --cpu-threads, --share-host, --cpu-kernels, --check-nan, --graph-replay, --stats,
// --test-freeze-at and the ibverbs provider's --ib_* flags. A command adds
// its own flags to it.
//
// ReadNodeOptions reads them, checked against the plan the node will run,
// before anything starts: every error is InvalidArgument naming the flag or
// the environment variable (exit 2). The process environment is read only
// through the `Environment` it is given (ProcessEnvironment() in a main):
// Flags first, then OFLITE_* (and `oflite launch`'s RANK/WORLD_SIZE), then
// the launcher's variables (cluster_env.h: Slurm inside a step, OpenMPI):
//   rank        --rank, else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, else
//               0; it must name a machine of the plan;
//   world       WORLD_SIZE, SLURM_STEP_NUM_TASKS/SLURM_NTASKS or
//               OMPI_COMM_WORLD_SIZE when set: must equal the plan's machine
//               count (an error names both numbers and the variable);
//   master      --master HOST:PORT, else OFLITE_MASTER, else Slurm's first
//               node of the step with a port from the job and step ids, else
//               the first host of --hostfile / OFLITE_HOSTFILE (OpenMPI
//               syntax) with port kDefaultMasterPort; required by a
//               multi-machine plan;
//   local rank  SLURM_LOCALID or OMPI_COMM_WORLD_LOCAL_RANK: when the
//               launcher did not bind this process's CPUs, it is bound to
//               its local rank's share (comm/launch/cpu_binding.h, the rule
//               of `oflite launch --bind auto`);
//   job token   OFLITE_JOB_TOKEN, required by a multi-machine plan (under
//               Slurm or mpirun the error says how to export it);
//   address     OFLITE_HOST (what peers dial), default 127.0.0.1;
//   host id     --host_id, else OFLITE_HOST_ID, else this host's identity
//               (comm/per_peer_transport.h): --comm auto puts peers with
//               the same one on shm, for every command alike;
//   TF32        OFLITE_CUDA_ALLOW_TF32=1;
//   host share  --share-host auto|threads|bind|off, else OFLITE_SHARE_HOST,
//               else auto: how ranks started unbound on one host share its
//               CPUs (comm/launch/host_share.h; NodeSession::Start applies
//               it after the rendezvous).
// Not thread-safe; a plain value once read.
#ifndef ONEFLOW_LITE_SESSION_NODE_OPTIONS_H_
#define ONEFLOW_LITE_SESSION_NODE_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/comm/launch/host_share.h"
#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/session/cluster_env.h"
#include "oneflow_lite/session/flags.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace session {

// The process's environment (getenv); for a program's main, not libraries.
Environment ProcessEnvironment();

struct NodeOptions {
  // Names the program in every line the session prints ("oflite run").
  std::string command = "oflite run";
  // The files a run reads and writes besides the plan (checkpoints, the
  // --eval-out, --metrics-out and output files) and the clock of its
  // progress lines, step and evaluation times and failure attribution.
  // Not owned; outlives the session.
  Env* env = Env::Default();
  int64_t rank = 0;
  std::string master;  // HOST:PORT; multi-machine plans only
  // Where rank, world and master came from, one line for the log ("rank 1
  // of 4 from Slurm (SLURM_PROCID), master node01:23456 from
  // SLURM_STEP_NODELIST"); printed when a multi-machine session starts.
  std::string placement;
  int64_t local_rank = -1;  // from the launcher; -1 when not given
  // CPUs to bind this process to before any thread starts (empty: leave
  // the affinity as it is).
  std::vector<int> bind_cpus;
  std::string comm = "auto";
  std::string host_id;
  std::string listen_host = "127.0.0.1";
  std::string job_token;
  comm::ibverbs::IbverbsOptions ibverbs;
  std::string ib_emulator;  // the verbs emulator's fabric; "" for real devices
  std::chrono::milliseconds ring_timeout{120000};
  std::chrono::milliseconds join_grace{5000};
  std::chrono::milliseconds watchdog{60000};
  int cpu_threads = 0;  // 0: the plan's (kernels/cpu/cpu_threads.h)
  comm::ShareHostMode share_host = comm::ShareHostMode::kAuto;
  // --cpu-kernels when given ("" keeps the process's choice).
  std::string cpu_kernels;
  bool check_nan = false;
  bool graph_replay = true;
  bool allow_tf32 = false;
  bool print_stats = false;
  // Fault injection for tests: a point name ("join", "train-finish",
  // "eval-finish")
  // at which this rank stops itself with SIGSTOP, as a rank frozen by the
  // operator or the OS would. Empty in production.
  std::string freeze_at;
};

std::vector<cli::FlagSpec> NodeFlagSpecs();

// The help of --join-grace-seconds.
inline constexpr char kJoinGraceHelp[] =
    "rank 0: after refusing a wrong-token join claiming rank R, wait this long for the "
    "genuine rank R before failing the job";

// See the file comment. `command` becomes NodeOptions::command.
StatusOr<NodeOptions> ReadNodeOptions(const cli::FlagSet& flags, const Plan& plan,
                                      const Environment& env, const std::string& command);

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_NODE_OPTIONS_H_
