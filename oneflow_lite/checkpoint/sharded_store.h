// ShardedCheckpointStore: saves and restores variables one device part at a
// time, on top of the logical checkpoints of checkpoint.h.
//
// The runtime keeps each variable as parts (one per device of its
// placement): either the whole tensor on every device (broadcast,
// split_axis = -1) or a balanced split along split_axis (docs/plan_format.md:
// along an axis of length n over p devices, part k starts at k * (n / p) +
// min(k, n % p) and has n / p elements, plus one if k < n % p).
//
// Saving: SavePart copies a part into the variable's logical tensor for that
// iteration (broadcast parts: only parallel_id 0 is used). When every part of
// every variable given in Options::variables has arrived for an iteration,
// the checkpoint <save_root>/iter-<iteration> is written (SaveVariables) and
// the assembly memory is freed. Every part of each listed variable must go
// through this store (one process holds them all, or the caller lists only
// the variables whose parts are local).
//
// Restoring: RestorePart loads the logical variable from Options::restore_dir
// on first use (checking dtype and shape), caches it, and copies the part's
// slice; it returns false when no restore_dir is set (the initializer runs).
//
// Thread-safe: the runtime calls from several actor threads at once. A
// checkpoint is written by the thread whose SavePart completes it.
#ifndef ONEFLOW_LITE_CHECKPOINT_SHARDED_STORE_H_
#define ONEFLOW_LITE_CHECKPOINT_SHARDED_STORE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"

namespace oflite {

// Where one device's part sits in the logical tensor.
struct PartLayout {
  int64_t parallel_id = 0;
  int64_t parallel_num = 1;
  int64_t split_axis = -1;  // -1: the part is the whole tensor
};

// The part's desc, or InvalidArgument naming `name` when the layout does not
// fit the logical desc (axis out of range, fewer elements than devices).
StatusOr<TensorDesc> PartDesc(const std::string& name, const TensorDesc& logical,
                              const PartLayout& layout);

// Copies between a logical tensor and a part (descs already checked).
void CopyPartFromLogical(const HostTensor& logical, const PartLayout& layout, Blob* part);
void CopyPartIntoLogical(const Blob& part, const PartLayout& layout, HostTensor* logical);

class ShardedCheckpointStore {
 public:
  struct Options {
    std::string save_root;                        // empty: SavePart is an error
    std::string restore_dir;                      // empty: RestorePart returns false
    std::map<std::string, TensorDesc> variables;  // name -> logical desc
    Env* env = Env::Default();                    // not owned; outlives the store
  };

  explicit ShardedCheckpointStore(Options options) : options_(std::move(options)) {}

  StatusOr<bool> RestorePart(const std::string& name, const PartLayout& layout, Blob* part);
  Status SavePart(const std::string& name, const PartLayout& layout, int64_t iteration,
                  const Blob& part);

  // "<root>/iter-<iteration>".
  static std::string CheckpointDir(const std::string& root, int64_t iteration);
  // The complete checkpoint (with a MANIFEST) of the highest iteration under
  // `root`; NotFound naming `root` if there is none.
  static StatusOr<std::string> LatestCheckpoint(const std::string& root, Env* env = Env::Default());
  // Every complete checkpoint under `root`, highest iteration first (only
  // the MANIFEST's presence is checked); NotFound naming `root` if none.
  static StatusOr<std::vector<std::string>> ListCheckpoints(const std::string& root,
                                                            Env* env = Env::Default());

 private:
  struct Pending {
    std::map<std::string, HostTensor> tensors;
    std::map<std::string, std::set<int64_t>> parts_seen;  // name -> parallel ids
    int64_t complete_variables = 0;
  };

  const Options options_;
  std::mutex mutex_;
  std::map<int64_t, Pending> pending_;          // by iteration
  std::map<std::string, HostTensor> restored_;  // cache of logical tensors
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_CHECKPOINT_SHARDED_STORE_H_
