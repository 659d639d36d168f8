// oflite launch: start every machine of a Plan as processes.
//
// Local (--nproc N): N processes `oflite run --plan P --rank R --master
// 127.0.0.1:PORT`, machine R advertising 127.0.0.(R+1). Remote (--hosts
// a,b,...): one `RSH HOST 'sh -c CONTROL ... oflite run ...'` per host (RSH:
// --rsh, default ssh), rank = position, master = the first host. N (or the host count) must equal the plan's machine count
// (checked before anything starts: exit 2 naming both). Every child gets the
// job token in OFLITE_JOB_TOKEN (a fresh random one unless --job_token is
// given), plus RANK, WORLD_SIZE and OFLITE_HOST. --command eval|predict
// starts `oflite eval` / `oflite predict` on every rank instead of run. Arguments after "--" are
// passed to every `oflite run`, with "{rank}" replaced by the rank (e.g. --
// --iters 20 --metrics-out m.{rank}). Output lines are prefixed "[rank R] ".
// Local ranks are bound to their own share of the cores (--bind auto, the
// default: when every core gets the same load; comm/launch/cpu_binding.h), so
// each rank's threads share caches and its compute team sizes itself to
// its share; the first line on stderr says which rank got which CPUs.
//
// Failures (comm/launch/process_group.h): when one rank fails the others
// are stopped (SIGTERM, SIGKILL after --grace_ms; a rank that exits 4,
// kExitPeerFailed, first gives the others --grace_ms to end on their own)
// and launch exits 1 (2 when the blamed rank exited 2: bad input such as a
// flag after "--"); its last line names the first cause, not the first
// rank to exit: "oflite launch: rank R <exited with code C | was killed by
// signal S>; stopped the others: <that rank's last error line>", preceded by
// one line with every other rank's outcome. Ranks that exit 4 were
// healthy: when every rank but one has exited 4 and that one is frozen
// (SIGSTOP), launch kills it at once (SIGKILL: it cannot act on SIGTERM)
// and names it: "oflite launch: rank R was frozen (stopped by a signal)
// after every other rank exited with code 4 (a peer failed); killed it".
// SIGINT or SIGTERM to launch is forwarded to every rank (SIGKILL after
// --grace_ms); launch then exits 128 + the signal with "oflite launch:
// interrupted by signal ...".
// Remote ranks: ssh forwards no signal (without a terminal) and killing
// the local ssh leaves the remote rank running. So each remote rank runs
// under a small controlling shell on its host (kRemoteControl below) that
// reads one line from its stdin, which the remote shell carries from
// launch (RankProcess::signal_by_stdin): launch writes the signal's name
// ("TERM", "INT") and closes it; the controller sends that signal to the
// rank, and SIGKILL if it outlives --grace_ms. End-of-file without a line
// (launch killed, the connection broken) counts as TERM, so a remote rank
// never outlives its launcher for long. The rank's exit code comes back
// through the remote shell (128 + N when the rank died of signal N). Any
// remote shell that runs `RSH [OPTIONS] HOST COMMAND` with COMMAND through
// the host's sh and stdin passed on works: ssh, or `ip netns exec` behind
// a wrapper (tests/netns).
// With "-- --trace DIR" every rank writes DIR/rank-R.json and launch, once
// all succeeded, merges them into DIR/trace.json (docs/tracing.md).
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "oneflow_lite/comm/builtin_providers.h"
#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/comm/ibverbs/ibverbs_flags.h"
#include "oneflow_lite/comm/launch/cpu_binding.h"
#include "oneflow_lite/comm/launch/process_group.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/common/proto_io.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/interrupt_catcher.h"
#include "oneflow_lite/session/flags.h"
#include "tools/oflite/trace_file.h"
#include "oneflow_lite/session/trace_support.h"

namespace oflite {
namespace cli {
namespace {

std::string SelfPath() {
  char path[PATH_MAX];
  ssize_t length = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return "oflite";
  path[length] = '\0';
  return path;
}

// The controlling shell of a remote rank (file comment), run as `sh -c
// kRemoteControl oflite-rank GRACE_TENTHS RANK_COMMAND...`: it starts a
// watcher in the background and then becomes the rank (exec: same pid, same
// start time, and SIGINT not ignored as it would be in a background job).
// The watcher reads the controller's stdin (saved on fd 3; a background
// job's own stdin is /dev/null) and signals the rank only while that pid
// still has the rank's start time, so a reused pid is never hit. It keeps
// no output open, so the remote shell's session ends with the rank.
constexpr const char kRemoteControl[] =
    "exec 3<&0 </dev/null; grace=$1; shift; rank=$$; "
    "started() { s=$(cat /proc/$rank/stat 2>/dev/null) || return 0; s=${s##*) }; set -- $s; "
    "echo \"$20\"; }; me=$(started); "
    "{ read -r sig || sig=TERM; case $sig in INT|TERM|HUP|QUIT) ;; *) sig=TERM ;; esac; "
    "[ \"$(started)\" = \"$me\" ] && kill -s \"$sig\" $rank; t=0; "
    "while [ \"$(started)\" = \"$me\" ] && [ $t -lt \"$grace\" ]; do sleep 0.1; t=$((t+1)); done; "
    "[ \"$(started)\" = \"$me\" ] && kill -s KILL $rank; } <&3 >/dev/null 2>&1 & "
    "exec \"$@\" 3<&-";

// Single-quotes `text` for a POSIX shell (the remote side of ssh).
std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// The words of --rsh (split at blanks; no quoting).
std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + " ") {
    if (c == ' ' || c == '\t') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  return words;
}

std::vector<std::string> SplitHosts(const std::string& text) {
  std::vector<std::string> hosts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) hosts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return hosts;
}

int Fail(int code, const Status& status) {
  std::fprintf(stderr, "oflite launch: %s\n", status.message().c_str());
  return code;
}

constexpr const char kDefaultRsh[] = "ssh -o BatchMode=yes -o ConnectTimeout=10";

// SIGINT/SIGTERM received by launch, for RunProcessGroup to forward.
std::atomic<int> g_interrupt{0};


// The plan's machine count must equal the number of processes. A remote
// plan that is not readable here is checked by the nodes instead.
Status CheckMachineCount(const std::string& plan_path, int world, bool remote) {
  if (remote && access(plan_path.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "oflite launch: note: %s is not readable here\n", plan_path.c_str());
    return Status::OK();
  }
  ASSIGN_OR_RETURN(Plan plan, LoadPlan(plan_path));
  const int machines = plan.machine_size();
  if (machines != world) {
    return InvalidArgumentError(
        remote ? "--hosts gives " : "--nproc ", world, remote ? " host(s)" : "", " but ",
        plan_path, " is a ", machines, "-machine plan: give ", remote ? "one host per machine" :
        "--nproc " + std::to_string(machines));
  }
  return Status::OK();
}

// One line with every rank's outcome except the blamed one, e.g. "other
// ranks: 0 exited 4 (a peer failed), 2 stopped by launch".
std::string OtherOutcomes(const comm::ProcessGroupResult& result) {
  std::string text;
  for (size_t rank = 0; rank < result.ranks.size(); ++rank) {
    if (static_cast<int>(rank) == result.failed_rank) continue;
    const comm::RankOutcome& outcome = result.ranks[rank];
    std::string what = outcome.exit_code == 0 ? "finished" : "exited " +
                                                                 std::to_string(outcome.exit_code);
    if (outcome.stopped_by_us) {
      what = "stopped by launch";
    } else if (outcome.signaled) {
      what = "killed by signal " + std::to_string(outcome.exit_code - 128);
    } else if (outcome.exit_code == kExitPeerFailed) {
      what += " (a peer failed)";
    }
    text += (text.empty() ? "" : ", ") + std::to_string(rank) + " " + what;
  }
  return text;
}

// Prints the outcome of a failed group (last line: the first cause) and
// returns launch's exit code.
int ReportFailure(const comm::ProcessGroupResult& result) {
  if (result.interrupted_by != 0) {
    std::fprintf(stderr, "oflite launch: %s\n", result.message.c_str());
    return 128 + result.interrupted_by;
  }
  const std::string others = OtherOutcomes(result);
  if (result.failed_rank >= 0 && !others.empty()) {
    std::fprintf(stderr, "oflite launch: other ranks: %s\n", others.c_str());
  }
  std::string last = result.message;
  if (!result.cause.empty()) last += ": " + result.cause;
  std::fprintf(stderr, "oflite launch: %s\n", last.c_str());
  // Bad input found by a rank (a flag after "--", the plan) stays bad input.
  return result.exit_code == kExitBadInput ? kExitBadInput : kExitFailure;
}

// What every rank runs.
struct LaunchSpec {
  std::string plan;
  std::vector<std::string> hosts;  // empty: local processes
  int world = 0;
  std::string oflite;  // the binary the nodes run
  std::string master;  // HOST:PORT
  std::string token;
  std::string comm;  // empty: the nodes' default
  std::vector<std::string> passthrough;  // after "--", "{rank}" replaced
  std::string command = "run";  // the subcommand every rank runs
  std::vector<std::string> rsh;  // the remote shell command before the host
  int64_t grace_ms = 5000;       // the remote controller's SIGKILL delay
};

// One command per rank: `oflite run ...` locally, or through the remote
// shell under the controlling shell, with the environment passed on the
// remote command line.
std::vector<comm::RankProcess> RankCommands(const LaunchSpec& spec) {
  std::vector<comm::RankProcess> ranks(spec.world);
  for (int rank = 0; rank < spec.world; ++rank) {
    const std::string host =
        spec.hosts.empty() ? "127.0.0." + std::to_string(rank + 1) : spec.hosts[rank];
    std::vector<std::string> run = {spec.oflite, spec.command, "--plan", spec.plan, "--rank",
                                    std::to_string(rank), "--master", spec.master};
    if (!spec.comm.empty()) {
      run.push_back("--comm");
      run.push_back(spec.comm);
    }
    for (std::string arg : spec.passthrough) {
      for (size_t at = arg.find("{rank}"); at != std::string::npos; at = arg.find("{rank}")) {
        arg.replace(at, 6, std::to_string(rank));
      }
      run.push_back(arg);
    }
    std::vector<std::string> environment = {
        "OFLITE_JOB_TOKEN=" + spec.token, "RANK=" + std::to_string(rank),
        "WORLD_SIZE=" + std::to_string(spec.world), "OFLITE_HOST=" + host};
    if (spec.hosts.empty()) {
      ranks[rank].argv = run;
      ranks[rank].environment = environment;
      continue;
    }
    // "; exit $?": the host's shell waits, so a rank killed by signal N
    // comes back as exit code 128 + N (ssh itself would exit 255).
    std::string remote = "sh -c " + ShellQuote(kRemoteControl) + " oflite-rank " +
                         std::to_string((spec.grace_ms + 99) / 100) + " env ";
    for (const auto& entry : environment) remote += ShellQuote(entry) + " ";
    for (const auto& arg : run) remote += ShellQuote(arg) + " ";
    remote += "; exit $?";
    ranks[rank].argv = spec.rsh;
    ranks[rank].argv.push_back(host);
    ranks[rank].argv.push_back(remote);
    ranks[rank].signal_by_stdin = true;
  }
  return ranks;
}

// With "-- --trace DIR" (local ranks): merges DIR/rank-*.json into
// DIR/trace.json on rank 0's clock (trace_file.h). A trace that cannot be
// merged fails launch (exit 1) naming the file; the run itself succeeded.
int MergeTraces(const std::string& dir, int world, bool remote) {
  if (dir.empty() || world < 2) return kExitOk;
  if (remote) {
    std::fprintf(stderr, "oflite launch: the rank traces stay on their hosts (%s/rank-R.json); "
                 "merge them with `oflite trace merge`\n", dir.c_str());
    return kExitOk;
  }
  StatusOr<std::vector<std::string>> files = session::RankTraceFiles(dir, world);
  Status merged = files.ok() ? MergeRankTraces(*files, dir + "/trace.json") : files.status();
  if (!merged.ok()) return Fail(kExitFailure, merged.WithContext("merging the traces"));
  std::fprintf(stderr, "oflite launch: merged the traces of %d ranks into %s/trace.json\n", world,
               dir.c_str());
  return kExitOk;
}

}  // namespace

int RunLaunch(int argc, char** argv) {
  int flag_argc = argc;
  std::vector<std::string> passthrough;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--") continue;
    flag_argc = i;
    for (int j = i + 1; j < argc; ++j) passthrough.push_back(argv[j]);
    break;
  }
  FlagSet flags("oflite launch", "--plan PLAN.pb (--nproc N | --hosts a,b,...) [-- RUN ARGS]",
                {{"plan", "the Plan file"},
                 {"nproc", "number of local processes (machines)"},
                 {"hosts", "comma-separated hosts to start nodes on through --rsh"},
                 {"rsh",
                  "remote shell for --hosts, run as `RSH HOST COMMAND` (COMMAND for the host's "
                  "sh; stdin passed on: it carries launch's signals to the rank's controller)",
                  false, kDefaultRsh},
                 {"port", "master (rank 0) port; default: a free port", false, "0"},
                 {"comm", "transport passed to every node: " + comm::BuiltinProviders({}).NameList(),
                  false, ""},
                 {"job_token", "job token; default: a fresh random token", false, ""},
                 {"ib_emulator",
                  "passed to every node: run --comm ibverbs on the verbs emulator's fabric of "
                  "this name instead of libibverbs (testing without RDMA hardware; one host)",
                  false, ""},
                 {"oflite", "oflite binary for the nodes; default: this one", false, ""},
                 {"command", "what every rank runs: run, eval or predict", false, "run"},
                 {"bind",
                  "local ranks' CPU binding: auto (each rank its own share of the cores when "
                  "they fit, rank r on core r mod C when the ranks are a multiple of the C "
                  "cores, else unbound), cores (also then: rank r on core r mod C) or none",
                  false, "auto"},
                 {"grace_ms",
                  "after a failure or an interrupt, SIGTERM -> SIGKILL delay (and how long a "
                  "rank exiting 4 leaves the others to end on their own)",
                  false, "5000"}});
  if (std::optional<int> done = flags.ParseCommandLine(flag_argc, argv, "oflite launch")) {
    return *done;
  }
  const std::string plan = flags.Get("plan");
  if (plan.empty()) return Fail(kExitBadInput, InvalidArgumentError("--plan is required"));
  const std::string command = flags.Get("command");
  if (command != "run" && command != "eval" && command != "predict") {
    return Fail(kExitBadInput, InvalidArgumentError("--command must be run, eval or predict, got '",
                                                    command, "'"));
  }
  const std::vector<std::string> hosts = SplitHosts(flags.Get("hosts"));
  int world = static_cast<int>(hosts.size());
  if (hosts.empty()) {
    auto nproc = flags.GetInt("nproc", 1, 253);
    if (!nproc.ok()) {
      return Fail(kExitBadInput, nproc.status().WithContext("give --nproc or --hosts"));
    }
    world = static_cast<int>(*nproc);
  } else if (flags.Has("nproc")) {
    return Fail(kExitBadInput, InvalidArgumentError("give --nproc or --hosts, not both"));
  }
  if (hosts.empty() && access(plan.c_str(), R_OK) != 0) {
    return Fail(kExitBadInput, NotFoundError("cannot read plan file ", plan));
  }
  const std::string comm_flag = flags.Get("comm");
  if (!comm_flag.empty()) {
    StatusOr<comm::ProviderFactory> provider = comm::BuiltinProviders({}).Find(comm_flag);
    if (!provider.ok()) return Fail(kExitBadInput, provider.status().WithContext("--comm"));
  }
  const std::string fabric = flags.Get("ib_emulator");
  if (!fabric.empty()) {
    Status checked = comm::ibverbs::IbEmulatorFromFlag(fabric).status();
    if (!checked.ok()) return Fail(kExitBadInput, checked);
    passthrough.push_back("--ib_emulator=" + fabric);
  }
  Status machines = CheckMachineCount(plan, world, !hosts.empty());
  if (!machines.ok()) return Fail(kExitBadInput, machines);
  auto port_flag = flags.GetInt("port", 0, 65535);
  if (!port_flag.ok()) return Fail(kExitBadInput, port_flag.status());
  auto grace = flags.GetInt("grace_ms", 0, 3600 * 1000);
  if (!grace.ok()) return Fail(kExitBadInput, grace.status());
  int port = static_cast<int>(*port_flag);
  if (port == 0) {
    auto probe = comm::ListenTcp("127.0.0.1", &port);
    if (!probe.ok()) return Fail(kExitFailure, probe.status());
    ::close(*probe);
  }
  const std::string token =
      flags.Get("job_token").empty() ? comm::control::GenerateJobToken() : flags.Get("job_token");
  const std::string oflite = flags.Get("oflite").empty()
                                 ? (hosts.empty() ? SelfPath() : std::string("oflite"))
                                 : flags.Get("oflite");
  auto bind = comm::ParseBindPolicy(flags.Get("bind"), "--bind");
  if (!bind.ok()) return Fail(kExitBadInput, bind.status());
  const std::vector<std::string> rsh = SplitWords(flags.Get("rsh"));
  if (!hosts.empty() && rsh.empty()) {
    return Fail(kExitBadInput, InvalidArgumentError("--rsh is empty: give a remote shell command"));
  }
  const std::string master_host = hosts.empty() ? "127.0.0.1" : hosts[0];
  const std::string master = master_host + ":" + std::to_string(port);

  std::vector<comm::RankProcess> ranks =
      RankCommands({plan, hosts, world, oflite, master, token, flags.Get("comm"), passthrough,
                    command, rsh, *grace});
  std::string binding;
  if (hosts.empty()) {  // one rank per remote host: its machine is its own
    const auto cores = comm::AllowedCores();
    std::vector<std::vector<int>> rank_cpus;
    for (int rank = 0; rank < world; ++rank) {
      ranks[rank].cpus = comm::CpusForLocalRank(cores, rank, world, *bind);
      rank_cpus.push_back(ranks[rank].cpus);
      // --bind none means none: the ranks would otherwise split the host's
      // cores among themselves after joining (oflite run --share-host auto).
      if (*bind == comm::BindPolicy::kNone) {
        ranks[rank].environment.push_back("OFLITE_SHARE_HOST=off");
      }
    }
    binding = comm::DescribeBinding(rank_cpus, *bind, cores.size());
  }
  std::fprintf(stderr, "oflite launch: %d machine(s), master %s%s%s\n", world, master.c_str(),
               binding.empty() ? "" : "; ", binding.c_str());
  comm::ProcessGroupOptions options;
  options.grace = std::chrono::milliseconds(*grace);
  options.peer_failed_exit_code = kExitPeerFailed;
  options.interrupt = &g_interrupt;
  InterruptCatcher catcher(&g_interrupt);
  auto result = comm::RunProcessGroup(ranks, options);
  if (!result.ok()) return Fail(kExitFailure, result.status());
  if (!result->ok) return ReportFailure(*result);
  return MergeTraces(session::TraceDirInArgs(passthrough), world, !hosts.empty());
}

}  // namespace cli
}  // namespace oflite
