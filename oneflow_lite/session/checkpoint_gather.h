// Checkpoints of a multi-machine run whose variables are split across
// machines (sharded optimizer states, tensor parallelism across machines,
// pipeline stages on other machines): every part a checkpoint needs is sent
// to rank 0, which assembles the logical tensors and writes the checkpoint
// (docs/checkpoint_format.md, "Multi-machine saves").
//
// Ownership (CheckpointPartOwners): from the plan alone, so every rank
// computes the same answer. A variable task's part is what the runtime
// saves (its 1-D view, common/nd_sbp_view.h, as VariableBody cuts it); a
// split part is needed once per distinct parallel id, a broadcast variable
// only as part 0. Among the tasks holding the same needed part (replicas of
// an n-D layout) the one with the lowest placement parallel id owns it,
// which is the view's first replica.
//
// GatheredCheckpointStore wraps the run's VariableStore (restores and
// every save are forwarded to it) and, for saves:
//  - on a rank other than 0: copies each owned part; once every part this
//    rank owns has arrived for an iteration, a background thread encodes
//    them (EncodeCheckpointParts) and puts them into the control plane's
//    key-value store in chunks of at most kCheckpointChunkBytes, then a
//    header key saying how many chunks there are;
//  - on rank 0: the first save of iteration n starts a gather on the
//    background thread: for each rank that owns parts, in rank order, it
//    waits for the header (bounded by Options::timeout, failing early
//    naming the rank if it leaves the job), reads the chunks, empties the
//    keys (the master keeps no checkpoint bytes), checks that the rank sent
//    exactly the parts it owns, then waits for rank 0's own parts and hands
//    everything to a ShardedCheckpointStore, which writes
//    <save_root>/iter-<n> with the usual crash-safe protocol. The checkpoint
//    is byte-identical to the one a one-machine run of the same state
//    writes: the same logical tensors through the same SaveVariables.
// Actor threads only copy parts; the encoding, the transfer and the write
// happen on the store's own thread, so training goes on meanwhile.
//
// Errors are sticky: the first one (a lost or late rank, a malformed
// message, a failed write) is returned by every later Save and by Flush,
// naming the rank and the iteration. Nothing is written for an iteration
// whose parts did not all arrive (the checkpoint directory is created by
// SaveVariables only once every part is in memory).
//
// Thread-safe. Flush blocks until every started send or gather has ended
// (each bounded by the timeout); callers run it after a run, before the
// job's finish barrier (PlanRun::before_finish), so a rank's sends never
// queue behind the barrier on the one control connection. The destructor
// stops the thread after the work in progress.
#ifndef ONEFLOW_LITE_SESSION_CHECKPOINT_GATHER_H_
#define ONEFLOW_LITE_SESSION_CHECKPOINT_GATHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "oneflow_lite/checkpoint/sharded_store.h"
#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/runtime_hooks.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace session {

// Chunks of one rank's parts in the key-value store are at most this long
// (the control plane's frames carry at most 16 MiB).
inline constexpr size_t kCheckpointChunkBytes = size_t{4} << 20;

// (variable, parallel id of its part): one part a checkpoint needs.
using PartKey = std::pair<std::string, int64_t>;

struct OwnedPart {
  PartLayout layout;
  int64_t machine = 0;  // the machine whose process sends it
};

// Every part a checkpoint of `plan` needs and its owner (see above).
// InvalidArgument naming the task when a variable task has no kernel.
StatusOr<std::map<PartKey, OwnedPart>> CheckpointPartOwners(const Plan& plan);

// One part as carried between ranks.
struct CarriedPart {
  std::string variable;
  PartLayout layout;
  HostTensor value;
};

// The message a rank sends for one iteration (docs/checkpoint_format.md,
// "Multi-machine saves"). Decode: DataLoss naming `source` on anything
// malformed (bad magic or version, truncation, trailing bytes, sizes that
// disagree with the shape).
std::string EncodeCheckpointParts(int64_t iteration, int64_t rank,
                                  const std::vector<CarriedPart>& parts);
Status DecodeCheckpointParts(const std::string& bytes, const std::string& source,
                             int64_t* iteration, int64_t* rank, std::vector<CarriedPart>* parts);

// The control plane's key-value store as the gather uses it
// (comm/control/control_client.h implements it; tests pass a fake).
class KeyValueChannel {
 public:
  virtual ~KeyValueChannel() = default;
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for `key`; fails early naming `publisher_rank` if
  // that rank leaves the job.
  virtual StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout,
                                    int publisher_rank) = 0;
};

class GatheredCheckpointStore final : public VariableStore {
 public:
  struct Options {
    std::string save_root;                        // rank 0 writes <save_root>/iter-<n>
    std::map<std::string, TensorDesc> variables;  // every variable of the plan
    std::map<PartKey, OwnedPart> owners;          // CheckpointPartOwners
    int64_t rank = 0;
    KeyValueChannel* channel = nullptr;           // not owned; outlives the store
    std::chrono::milliseconds timeout{60000};     // per key waited for
    Env* env = Env::Default();                    // not owned
  };
  // `inner` (not owned, outlives the store) gets every Restore and Save.
  GatheredCheckpointStore(VariableStore* inner, Options options);
  ~GatheredCheckpointStore() override;

  StatusOr<bool> Restore(const VariablePart& part, Blob* blob) override {
    return inner_->Restore(part, blob);
  }
  Status Save(const VariablePart& part, int64_t completed_iters, const Blob& blob) override;
  // Waits for the sends (rank > 0) or gathers and writes (rank 0) started
  // so far; the first error of the store, if any.
  Status Flush();

 private:
  // Parts of one iteration this rank owns, as they arrive.
  struct Iteration {
    std::map<PartKey, CarriedPart> parts;
    bool queued = false;  // handed to the worker
  };
  void WorkerLoop();
  Status SendIteration(int64_t iteration);    // rank > 0, worker thread
  Status GatherIteration(int64_t iteration);  // rank 0, worker thread
  Status ReceiveFrom(int64_t rank, int64_t iteration, ShardedCheckpointStore* disk);
  std::map<PartKey, CarriedPart> TakeLocalParts(int64_t iteration, Status* waited);
  Status Error();

  VariableStore* const inner_;
  const Options options_;
  std::set<PartKey> mine_;                    // parts this rank owns
  std::map<int64_t, std::set<PartKey>> senders_;  // rank 0: rank > 0 -> its parts

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, Iteration> iterations_;  // guarded by mutex_
  std::set<int64_t> finished_;               // guarded by mutex_; parts taken
  std::deque<int64_t> queue_;                // guarded by mutex_
  bool busy_ = false;                        // guarded by mutex_
  bool stop_ = false;                        // guarded by mutex_
  Status error_;                             // guarded by mutex_; the first error
  std::thread worker_;
};

// The control client as a KeyValueChannel.
class ControlKeyValue final : public KeyValueChannel {
 public:
  explicit ControlKeyValue(comm::control::ControlClient* client) : client_(client) {}
  Status Put(const std::string& key, const std::string& value) override {
    return client_->Put(key, value);
  }
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout,
                            int publisher_rank) override {
    return client_->Get(key, timeout, publisher_rank);
  }

 private:
  comm::control::ControlClient* const client_;  // not owned
};

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_CHECKPOINT_GATHER_H_
