// The oflite subcommands. Each takes the arguments after the subcommand
// name (argv[0] is the subcommand) and returns the process exit code
// (oneflow_lite/session/exit_codes.h).
#ifndef ONEFLOW_LITE_TOOLS_OFLITE_COMMANDS_H_
#define ONEFLOW_LITE_TOOLS_OFLITE_COMMANDS_H_

#include "oneflow_lite/session/exit_codes.h"

namespace oflite {
namespace cli {

int RunCompile(int argc, char** argv);
int RunInspect(int argc, char** argv);
int RunRun(int argc, char** argv);
int RunLaunch(int argc, char** argv);
int RunTrace(int argc, char** argv);
int RunEval(int argc, char** argv);     // eval_cmd.cc
int RunPredict(int argc, char** argv);  // eval_cmd.cc
int RunProfile(int argc, char** argv);  // profile_cmd.cc
int RunSimulate(int argc, char** argv);  // simulate_cmd.cc

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_OFLITE_COMMANDS_H_
