#include "oneflow_lite/session/checkpoint_choice.h"

#include <vector>

#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/checkpoint/sharded_store.h"

namespace oflite {
namespace session {
namespace {

// `dir` verified as a checkpoint to resume a run ending at `end_iteration`.
StatusOr<int64_t> VerifyResumable(const std::string& dir,
                                  const std::map<std::string, TensorDesc>& variables,
                                  int64_t end_iteration, Env* env) {
  ASSIGN_OR_RETURN(CheckpointManifest manifest, VerifyCheckpoint(dir, variables, env));
  if (manifest.iteration < 0 || manifest.iteration > end_iteration) {
    return DataLossError(dir, "/", kCheckpointManifestName, " records iteration ",
                         manifest.iteration, ", outside this run's [0, ", end_iteration, "]");
  }
  return manifest.iteration;
}

}  // namespace

StatusOr<ResumePoint> ChooseResumePoint(const std::string& path,
                                        const std::map<std::string, TensorDesc>& variables,
                                        int64_t end_iteration, Env* env) {
  std::vector<std::string> candidates = {path};
  if (!IsCheckpoint(path, env)) {
    StatusOr<std::vector<std::string>> listed = ShardedCheckpointStore::ListCheckpoints(path, env);
    if (!listed.ok()) return listed.status().WithContext("--resume");
    candidates = *listed;
  }
  StatusOr<int64_t> newest = VerifyResumable(candidates[0], variables, end_iteration, env);
  if (newest.ok()) return ResumePoint{candidates[0], *newest};
  const Status corrupt = newest.status().WithContext("--resume: checkpoint '" + candidates[0] +
                                                     "' cannot be used");
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (VerifyResumable(candidates[i], variables, end_iteration, env).ok()) {
      return InvalidArgumentError(corrupt.message(), "; the newest intact checkpoint under '",
                                  path, "' is '", candidates[i], "': resume from it with --resume ",
                                  candidates[i], " (nothing was deleted)");
    }
  }
  if (candidates.size() > 1) {
    return InvalidArgumentError(corrupt.message(), "; no older checkpoint under '", path,
                                "' is intact either");
  }
  return InvalidArgumentError(corrupt.message());
}

StatusOr<std::string> ChooseCheckpoint(const std::string& path,
                                       const std::map<std::string, TensorDesc>& variables,
                                       Env* env) {
  std::string dir = path;
  if (!IsCheckpoint(path, env)) {
    StatusOr<std::string> latest = ShardedCheckpointStore::LatestCheckpoint(path, env);
    if (!latest.ok()) return InvalidArgumentError("--checkpoint: ", latest.status().message());
    dir = *latest;
  }
  StatusOr<CheckpointManifest> manifest = VerifyCheckpoint(dir, variables, env);
  if (!manifest.ok()) {
    return manifest.status().WithContext("--checkpoint: checkpoint '" + dir + "' cannot be used");
  }
  return dir;
}

std::unique_ptr<CheckpointVariableStore> CheckpointRestorer(
    const std::string& dir, std::map<std::string, TensorDesc> variables) {
  CheckpointVariableStore::Options options;
  options.restore_dir = dir;
  options.final_iteration = -1;  // keeps nothing in memory
  options.variables = std::move(variables);
  return std::make_unique<CheckpointVariableStore>(std::move(options));
}

}  // namespace session
}  // namespace oflite
