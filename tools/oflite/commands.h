// The oflite subcommands. Each takes the arguments after the subcommand
// name (argv[0] is the subcommand) and returns the process exit code:
//   0 success, 1 runtime failure, 2 bad input (file, flag, plan),
//   3 not implemented in this build, 4 this rank was healthy but the job
//   ended because another rank failed or was lost (the launcher blames the
//   ranks that did not exit 4 first). `oflite launch` interrupted by
//   SIGINT/SIGTERM (forwarded to every rank) exits 128 + the signal.
#ifndef ONEFLOW_LITE_TOOLS_OFLITE_COMMANDS_H_
#define ONEFLOW_LITE_TOOLS_OFLITE_COMMANDS_H_

namespace oflite {
namespace cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitUnimplemented = 3;
inline constexpr int kExitPeerFailed = 4;

int RunCompile(int argc, char** argv);
int RunInspect(int argc, char** argv);
int RunRun(int argc, char** argv);
int RunLaunch(int argc, char** argv);
int RunTrace(int argc, char** argv);
int RunEval(int argc, char** argv);     // eval_cmd.cc
int RunPredict(int argc, char** argv);  // eval_cmd.cc

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_OFLITE_COMMANDS_H_
