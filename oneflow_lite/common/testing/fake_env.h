// FakeEnv: an Env for tests (leveldb's fault_injection_test and memenv in
// one small class). Files are real, through the wrapped Env (normally
// Env::Default() inside the test's TEST_TMPDIR); the fake adds
//  - injected failures: the n-th call of a write primitive from now fails
//    once (FailNth), or "crashes" (CrashAtNth): that call and every later
//    write primitive fail, so what is on disk is what a process that died
//    there would leave (no cleanup of temporary files happens either);
//  - counters of every write primitive, to aim an injection;
//  - a manual clock: NowMicros() returns the fake time, which moves only
//    by AdvanceMicros() and SleepForMicroseconds() (which returns at once).
// Reads, stats and listings are never failed.
//
// Thread-safe. The wrapped Env must outlive the fake; a WritableFile it
// returns must not outlive it.
// Link target: //oneflow_lite/common/testing:fake_env (testonly).
#ifndef ONEFLOW_LITE_COMMON_TESTING_FAKE_ENV_H_
#define ONEFLOW_LITE_COMMON_TESTING_FAKE_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "oneflow_lite/common/env.h"

namespace oflite {

// The write primitives a failure can be injected into.
enum class FileOp {
  kCreate,           // NewWritableFile
  kAppend,           // WritableFile::Append
  kSync,             // WritableFile::Sync
  kClose,            // WritableFile::Close
  kRename,           // RenameFile
  kRemove,           // RemoveFile
  kCreateDirectory,  // CreateDirectory
  kSyncDirectory,    // SyncDirectory
};

const char* FileOpName(FileOp op);

class FakeEnv : public EnvWrapper {
 public:
  explicit FakeEnv(Env* base = Env::Default()) : EnvWrapper(base) {}

  // The `nth` call (1 = the next one) of `op` from now returns Unavailable
  // "injected failure: <op> '<path>'"; later calls succeed. Replaces an
  // earlier injection for `op`.
  void FailNth(FileOp op, int nth);
  // The `nth` call of `op` from now, and every write primitive after it,
  // fail with Aborted "simulated crash ...": the process "died" at that
  // call (e.g. CrashAtNth(kRename, 1): between a file's write and its
  // rename).
  void CrashAtNth(FileOp op, int nth);
  // Forgets injections and the crash (the "restarted process").
  void ClearFaults();
  bool crashed() const;
  // Calls of `op` so far (failed ones included).
  int Count(FileOp op) const;

  void AdvanceMicros(int64_t micros);

  // Env.
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status CreateDirectory(const std::string& dir) override;
  Status SyncDirectory(const std::string& dir) override;
  int64_t NowMicros() override;
  void SleepForMicroseconds(int64_t micros) override;

  // Counts `op` on `path` and returns the injected error, if any (OK: go
  // on). Used by the fake's files.
  Status Intercept(FileOp op, const std::string& path);

 private:
  struct Fault {
    int remaining = 0;  // calls until it fires (1: the next one)
    bool crash = false;
  };

  mutable std::mutex mutex_;
  std::map<FileOp, Fault> faults_;
  std::map<FileOp, int> counts_;
  bool crashed_ = false;
  int64_t now_micros_ = 1'000'000;  // not 0, so that "unset" times stand out
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_TESTING_FAKE_ENV_H_
