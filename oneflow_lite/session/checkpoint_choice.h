// Which checkpoint a command starts from, chosen and verified before any
// work: `oflite run --resume`, `oflite eval|predict --checkpoint` and the
// training driver.
//
// A path names a checkpoint (a folder with a MANIFEST) or a root holding
// iter-* checkpoints, of which the newest is taken. The chosen checkpoint is
// verified in full against the plan's variables (every file read, every
// checksum checked, checkpoint/checkpoint.h VerifyCheckpoint) and, for a
// resume, its iteration must lie in [0, the run's last iteration]. Nothing
// is deleted and nothing falls back silently: a resume from a root whose
// newest checkpoint is corrupt is refused naming that checkpoint, its
// MANIFEST when the fault is there, and the newest intact one with the
// --resume argument that uses it. Every error is InvalidArgument or the
// checkpoint library's own, naming the flag and the file (bad input).
// Blocking file I/O; thread-compatible.
#ifndef ONEFLOW_LITE_SESSION_CHECKPOINT_CHOICE_H_
#define ONEFLOW_LITE_SESSION_CHECKPOINT_CHOICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/runtime/variable_stores.h"

namespace oflite {
namespace session {

struct ResumePoint {
  std::string dir;
  int64_t iteration = 0;
};

// --resume `path` for a run ending at `end_iteration`.
StatusOr<ResumePoint> ChooseResumePoint(const std::string& path,
                                        const std::map<std::string, TensorDesc>& variables,
                                        int64_t end_iteration, Env* env = Env::Default());

// --checkpoint `path` for an evaluation or prediction: the checkpoint dir.
StatusOr<std::string> ChooseCheckpoint(const std::string& path,
                                       const std::map<std::string, TensorDesc>& variables,
                                       Env* env = Env::Default());

// A store that restores every variable part from checkpoint `dir` (a
// chosen one) and keeps nothing it is given: an evaluation or prediction
// of that checkpoint, whatever the plan's split.
std::unique_ptr<CheckpointVariableStore> CheckpointRestorer(
    const std::string& dir, std::map<std::string, TensorDesc> variables);

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_CHECKPOINT_CHOICE_H_
