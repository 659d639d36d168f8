#include "oneflow_lite/common/testing/fake_env.h"

#include <utility>

namespace oflite {
namespace {

// A file whose writes go through FakeEnv::Intercept first.
class FakeWritableFile : public WritableFile {
 public:
  FakeWritableFile(FakeEnv* env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}

  Status Append(std::string_view data) override {
    RETURN_IF_ERROR(env_->Intercept(FileOp::kAppend, path_));
    return base_->Append(data);
  }
  Status Sync() override {
    RETURN_IF_ERROR(env_->Intercept(FileOp::kSync, path_));
    return base_->Sync();
  }
  Status Close() override {
    Status injected = env_->Intercept(FileOp::kClose, path_);
    Status closed = base_->Close();  // the descriptor is released either way
    return injected.ok() ? closed : injected;
  }

 private:
  FakeEnv* const env_;
  const std::string path_;
  const std::unique_ptr<WritableFile> base_;
};

}  // namespace

const char* FileOpName(FileOp op) {
  switch (op) {
    case FileOp::kCreate:
      return "create";
    case FileOp::kAppend:
      return "append";
    case FileOp::kSync:
      return "sync";
    case FileOp::kClose:
      return "close";
    case FileOp::kRename:
      return "rename";
    case FileOp::kRemove:
      return "remove";
    case FileOp::kCreateDirectory:
      return "create directory";
    case FileOp::kSyncDirectory:
      return "sync directory";
  }
  return "?";
}

void FakeEnv::FailNth(FileOp op, int nth) {
  std::lock_guard<std::mutex> lock(mutex_);
  faults_[op] = Fault{nth, false};
}

void FakeEnv::CrashAtNth(FileOp op, int nth) {
  std::lock_guard<std::mutex> lock(mutex_);
  faults_[op] = Fault{nth, true};
}

void FakeEnv::ClearFaults() {
  std::lock_guard<std::mutex> lock(mutex_);
  faults_.clear();
  crashed_ = false;
}

bool FakeEnv::crashed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return crashed_;
}

int FakeEnv::Count(FileOp op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = counts_.find(op);
  return found == counts_.end() ? 0 : found->second;
}

Status FakeEnv::Intercept(FileOp op, const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[op];
  if (crashed_) {
    return AbortedError("simulated crash: ", FileOpName(op), " '", path, "' after the crash");
  }
  auto fault = faults_.find(op);
  if (fault == faults_.end() || --fault->second.remaining > 0) return Status::OK();
  const bool crash = fault->second.crash;
  faults_.erase(fault);
  if (crash) {
    crashed_ = true;
    return AbortedError("simulated crash at ", FileOpName(op), " '", path, "'");
  }
  return UnavailableError("injected failure: ", FileOpName(op), " '", path, "'");
}

StatusOr<std::unique_ptr<WritableFile>> FakeEnv::NewWritableFile(const std::string& path) {
  RETURN_IF_ERROR(Intercept(FileOp::kCreate, path));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> base, EnvWrapper::NewWritableFile(path));
  return std::unique_ptr<WritableFile>(new FakeWritableFile(this, path, std::move(base)));
}

Status FakeEnv::RenameFile(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(Intercept(FileOp::kRename, from));
  return EnvWrapper::RenameFile(from, to);
}

Status FakeEnv::RemoveFile(const std::string& path) {
  RETURN_IF_ERROR(Intercept(FileOp::kRemove, path));
  return EnvWrapper::RemoveFile(path);
}

Status FakeEnv::CreateDirectory(const std::string& dir) {
  RETURN_IF_ERROR(Intercept(FileOp::kCreateDirectory, dir));
  return EnvWrapper::CreateDirectory(dir);
}

Status FakeEnv::SyncDirectory(const std::string& dir) {
  RETURN_IF_ERROR(Intercept(FileOp::kSyncDirectory, dir));
  return EnvWrapper::SyncDirectory(dir);
}

int64_t FakeEnv::NowMicros() {
  std::lock_guard<std::mutex> lock(mutex_);
  return now_micros_;
}

void FakeEnv::SleepForMicroseconds(int64_t micros) { AdvanceMicros(micros); }

void FakeEnv::AdvanceMicros(int64_t micros) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (micros > 0) now_micros_ += micros;
}

}  // namespace oflite
