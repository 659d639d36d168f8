// Env: the files and the clock a library sees, passed in instead of reached
// through globals (leveldb's Env). Library code that reads or writes files,
// or reads the clock, takes an `Env*` through its options or constructor;
// tests pass a fake (common/testing/fake_env.h) that injects write failures
// and runs a manual clock. Env::Default() is the real POSIX environment,
// meant only as a default argument (`Env* env = Env::Default()`).
//
// An Env has a few virtual primitives (open a file to read or to write,
// rename, remove, create a directory, sync a directory, stat, list, the
// clock) and the composite operations built once on top of them
// (non-virtual, so a fake that overrides a primitive changes every user the
// same way): ReadFileToString with a size limit, WriteFileAtomically,
// WriteSyncedFile, CreateDirectories, CheckParentDirectory.
//
// Errors are Status values naming the path (and the limit, for a file too
// large): NotFound for a missing file, InvalidArgument for a path that
// cannot be used (not a regular file, a missing parent directory),
// OutOfRange for a file larger than the caller's limit, PermissionDenied,
// ResourceExhausted (no space) or Unavailable for the operating system's
// other refusals.
//
// Thread safety: every method of an Env is safe to call from several
// threads at once (Env::Default() and EnvWrapper are; a fake must be too).
// A SequentialFile or WritableFile is used by one thread at a time. All
// file operations block the calling thread.
#ifndef ONEFLOW_LITE_COMMON_ENV_H_
#define ONEFLOW_LITE_COMMON_ENV_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {

// A file open for reading from its start. Owned by the caller; closed on
// destruction.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to `size` bytes into `buffer` (caller-owned, at least `size`
  // bytes); returns how many were read, 0 at the end of the file.
  virtual StatusOr<size_t> Read(char* buffer, size_t size) = 0;
  // The file's size when it was opened. A hint (to refuse a file that is
  // too large at once, to reserve memory), never a bound: the file may
  // grow while it is read.
  virtual uint64_t SizeHint() const = 0;
};

// A file open for writing, created empty (or truncated). Owned by the
// caller; destroying it without Close() closes it and drops the error.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // Flushes what was appended to the device (fsync).
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
};

class Env {
 public:
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  virtual ~Env() = default;

  // The process's POSIX environment (real files, std::chrono::steady_clock).
  // Never destroyed. Use it only as a default argument: library code takes
  // the Env it is given.
  static Env* Default();

  // --- primitives ---

  // Opens a regular file for reading. NotFound when missing,
  // InvalidArgument naming the path when it is not a regular file (a
  // directory, a device such as /dev/zero, a FIFO: opening one never
  // blocks).
  virtual StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) = 0;
  // Creates `path` (or truncates it) for writing; mode 0644.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // rename(2): replaces `to` atomically.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // NotFound when `path` does not exist.
  virtual Status RemoveFile(const std::string& path) = 0;
  // Creates one directory (mode 0755); AlreadyExists when `dir` exists.
  virtual Status CreateDirectory(const std::string& dir) = 0;
  // Makes the directory's entries (created, renamed, removed files)
  // durable (fsync of the directory). OK where the file system cannot sync
  // a directory.
  virtual Status SyncDirectory(const std::string& dir) = 0;
  // The names in `dir` (not "." and ".."), in no particular order.
  virtual StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;

  // Microseconds on a monotonic clock: for durations and deadlines, not the
  // time of day.
  virtual int64_t NowMicros() = 0;
  // Blocks the calling thread for `micros` (a fake may only advance its
  // clock).
  virtual void SleepForMicroseconds(int64_t micros) = 0;

  // --- built on the primitives ---

  // The whole content of the regular file `path`, read in chunks. A file
  // with more than `max_bytes` bytes is refused (OutOfRange naming the
  // file and the limit) without reading more than `max_bytes` + one chunk,
  // whatever its size said when it was opened.
  StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes);

  // Replaces `path` with `pieces` (concatenated) so that a reader sees the
  // old file or the new one, never a mix, and a crash leaves one of them:
  // writes "<path>.tmp.<pid>.<n>" in the same directory, fsyncs and closes
  // it, renames it over `path`, then fsyncs the directory. On failure the
  // temporary file is removed and `path` is unchanged (unless only the
  // directory sync failed). A missing parent directory is InvalidArgument
  // naming it; other errors name the file.
  Status WriteFileAtomically(const std::string& path, const std::vector<std::string_view>& pieces);
  Status WriteFileAtomically(const std::string& path, std::string_view data) {
    return WriteFileAtomically(path, std::vector<std::string_view>{data});
  }

  // The first half of WriteFileAtomically, for callers that rename several
  // files together later (checkpoints): creates or truncates `path`,
  // writes `pieces`, fsyncs and closes it; removes it on failure.
  Status WriteSyncedFile(const std::string& path, const std::vector<std::string_view>& pieces);

  // Creates `dir` and its missing parents (mkdir -p). FailedPrecondition
  // naming the path when it (or a parent) exists and is not a directory.
  Status CreateDirectories(const std::string& dir);

  // OK when the directory `path` would be created in exists (the current
  // directory for a bare name); InvalidArgument naming it otherwise. Lets
  // a command refuse an output path before doing the work.
  Status CheckParentDirectory(const std::string& path);

 private:
  std::atomic<uint64_t> next_temp_id_{0};  // distinct temporary names per Env
};

// An Env that forwards every primitive to another one; derive from it to
// change a few (the fakes do). `target` must outlive the wrapper.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    return target_->NewSequentialFile(path);
  }
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return target_->NewWritableFile(path);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  Status RemoveFile(const std::string& path) override { return target_->RemoveFile(path); }
  Status CreateDirectory(const std::string& dir) override { return target_->CreateDirectory(dir); }
  Status SyncDirectory(const std::string& dir) override { return target_->SyncDirectory(dir); }
  StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    return target_->GetChildren(dir);
  }
  bool FileExists(const std::string& path) override { return target_->FileExists(path); }
  bool IsDirectory(const std::string& path) override { return target_->IsDirectory(path); }
  int64_t NowMicros() override { return target_->NowMicros(); }
  void SleepForMicroseconds(int64_t micros) override { target_->SleepForMicroseconds(micros); }

 private:
  Env* const target_;
};

// The directory part of `path` ("." for a bare name, "/" for "/x").
std::string ParentDirectory(const std::string& path);

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_ENV_H_
