// What the launcher's environment says about this process's place in a job:
// the one home for reading Slurm's and OpenMPI's variables (docs/launch.md).
// Nothing here reads the process environment or a file on its own: the
// caller passes an Environment (ProcessEnvironment() in a main, a map in a
// test) and the hostfile's contents. Pure functions; thread-compatible.
//
// Slurm, inside a step (SLURM_PROCID set):
//   rank        SLURM_PROCID
//   world       SLURM_STEP_NUM_TASKS, else SLURM_NTASKS
//   local rank  SLURM_LOCALID; local size from SLURM_STEP_TASKS_PER_NODE
//               (else SLURM_TASKS_PER_NODE) at SLURM_NODEID ("2(x3),1")
//   master host the first node of SLURM_STEP_NODELIST, else
//               SLURM_JOB_NODELIST (hostlist syntax, ExpandHostlist)
//   master port SlurmMasterPort(SLURM_JOB_ID, SLURM_STEP_ID): the same on
//               every task of a step, different for the next step
//   CPUs bound  SLURM_CPU_BIND_TYPE set and not "none" (srun --cpu-bind)
// OpenMPI (OMPI_COMM_WORLD_RANK set):
//   rank, world, local rank, local size  OMPI_COMM_WORLD_RANK, _SIZE,
//               _LOCAL_RANK, _LOCAL_SIZE
//   master host the first host of the hostfile (FirstHostOfHostfile), when
//               the caller gives one; port kDefaultMasterPort
// Every error is InvalidArgument naming the variable and its value.
#ifndef ONEFLOW_LITE_SESSION_CLUSTER_ENV_H_
#define ONEFLOW_LITE_SESSION_CLUSTER_ENV_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace session {

// The value of an environment variable, "" when unset or empty.
using Environment = std::function<std::string(const std::string& name)>;

// The master port of an OpenMPI job (or any job) that names only a host.
inline constexpr int kDefaultMasterPort = 29500;
// Slurm master ports lie in [kSlurmPortBase, kSlurmPortBase + kSlurmPortSpan).
inline constexpr int kSlurmPortBase = 20000;
inline constexpr int kSlurmPortSpan = 20000;

// One value the launcher gave, and the variable it came from ("" source:
// not given).
struct LauncherValue {
  int64_t value = -1;
  std::string source;
  bool given() const { return !source.empty(); }
};

struct LauncherPlacement {
  std::string launcher;  // "Slurm", "OpenMPI" or "" (neither)
  LauncherValue rank;
  LauncherValue world;
  LauncherValue local_rank;
  LauncherValue local_size;
  std::string master_host;         // "" when the launcher does not say
  std::string master_host_source;  // e.g. "SLURM_STEP_NODELIST"
  int master_port = 0;             // with master_host
  std::string master_port_source;  // e.g. "SLURM_JOB_ID/SLURM_STEP_ID"
  bool cpus_bound = false;         // the launcher bound this process's CPUs
};

// Reads Slurm's variables when SLURM_PROCID is set, else OpenMPI's when
// OMPI_COMM_WORLD_RANK is set, else returns an empty placement.
// `hostfile_contents`/`hostfile_name` (both may be empty): an OpenMPI
// hostfile, whose first host becomes the master under OpenMPI.
StatusOr<LauncherPlacement> ReadLauncherPlacement(const Environment& env,
                                                  const std::string& hostfile_name,
                                                  const std::string& hostfile_contents);

// Expands a Slurm hostlist ("node[01-04,07]", "a[1-2],b3",
// "rack[1-2]-n[1-2]"): zero padding is kept (the width of the lower bound).
// `what` names the text in errors (e.g. "SLURM_STEP_NODELIST"). At most
// 65536 hosts.
StatusOr<std::vector<std::string>> ExpandHostlist(const std::string& text,
                                                  const std::string& what);

// The first host of an OpenMPI hostfile: one host per line, optional
// "slots=N" / "max_slots=N" after it, '#' comments and blank lines ignored.
StatusOr<std::string> FirstHostOfHostfile(const std::string& contents, const std::string& what);

// kSlurmPortBase + FNV-1a("<job_id>.<step_id>") % kSlurmPortSpan.
int SlurmMasterPort(const std::string& job_id, const std::string& step_id);

// Tasks on node `node_id` from "2(x3),1" (SLURM_STEP_TASKS_PER_NODE syntax).
StatusOr<int64_t> SlurmTasksOnNode(const std::string& tasks_per_node, int64_t node_id,
                                   const std::string& what);

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_CLUSTER_ENV_H_
