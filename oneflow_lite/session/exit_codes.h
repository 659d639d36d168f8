// The exit codes of every OneFlow-Lite program that runs a plan (the oflite
// subcommands, the training driver's programs), one list for all of them:
//   0 success, 1 runtime failure, 2 bad input (file, flag, plan, checkpoint,
//   environment: reported before any work starts), 3 not implemented in
//   this build, 4 this rank was healthy but the job ended because another
//   rank failed or was lost (the launcher blames the ranks that did not
//   exit 4 first). `oflite launch` interrupted by SIGINT/SIGTERM (forwarded
//   to every rank) exits 128 + the signal.
#ifndef ONEFLOW_LITE_SESSION_EXIT_CODES_H_
#define ONEFLOW_LITE_SESSION_EXIT_CODES_H_

namespace oflite {
namespace cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitUnimplemented = 3;
inline constexpr int kExitPeerFailed = 4;

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_EXIT_CODES_H_
