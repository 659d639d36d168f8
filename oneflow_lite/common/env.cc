#include "oneflow_lite/common/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace oflite {
namespace {

// Reads and writes at most this much per system call.
constexpr size_t kIoChunk = size_t{1} << 20;
constexpr size_t kMaxWrite = size_t{1} << 30;

// `what` ("cannot open 'x'") with the errno's text, under the code that
// fits the error.
Status ErrnoError(int error, const std::string& what) {
  const std::string text = what + ": " + std::strerror(error);
  switch (error) {
    case ENOENT:
      return NotFoundError(text);
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(text);
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(text);
    case EEXIST:
      return AlreadyExistsError(text);
    default:
      return UnavailableError(text);
  }
}

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

class PosixSequentialFile : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixSequentialFile() override { ::close(fd_); }

  StatusOr<size_t> Read(char* buffer, size_t size) override {
    while (true) {
      const ssize_t got = ::read(fd_, buffer, std::min(size, kMaxWrite));
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return ErrnoError(errno, "cannot read " + Quoted(path_));
    }
  }
  uint64_t SizeHint() const override { return size_; }

 private:
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t written = ::write(fd_, data.data(), std::min(data.size(), kMaxWrite));
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) return ErrnoError(errno, "cannot write " + Quoted(path_));
      data.remove_prefix(static_cast<size_t>(written));
    }
    return Status::OK();
  }
  Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoError(errno, "cannot fsync " + Quoted(path_));
    return Status::OK();
  }
  Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return ErrnoError(errno, "cannot close " + Quoted(path_));
    return Status::OK();
  }

 private:
  const std::string path_;
  int fd_;
};

class PosixEnv : public Env {
 public:
  StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; cleared below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ErrnoError(errno, "cannot open " + Quoted(path));
    struct stat info;
    if (::fstat(fd, &info) != 0) {
      const int error = errno;
      ::close(fd);
      return ErrnoError(error, "cannot stat " + Quoted(path));
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      return InvalidArgumentError(Quoted(path), " is not a regular file (", FileKind(info.st_mode),
                                  ")");
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return std::unique_ptr<SequentialFile>(
        new PosixSequentialFile(path, fd, static_cast<uint64_t>(info.st_size)));
  }

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError(errno, "cannot create " + Quoted(path));
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoError(errno, "cannot rename " + Quoted(from) + " to " + Quoted(to));
    }
    return Status::OK();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoError(errno, "cannot remove " + Quoted(path));
    return Status::OK();
  }

  Status CreateDirectory(const std::string& dir) override {
    if (::mkdir(dir.c_str(), 0755) != 0) {
      return ErrnoError(errno, "cannot create directory " + Quoted(dir));
    }
    return Status::OK();
  }

  Status SyncDirectory(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoError(errno, "cannot open directory " + Quoted(dir));
    const int result = ::fsync(fd);
    const int error = errno;
    ::close(fd);
    // EINVAL: the file system cannot sync a directory (nothing to do).
    if (result != 0 && error != EINVAL) {
      return ErrnoError(error, "cannot fsync directory " + Quoted(dir));
    }
    return Status::OK();
  }

  StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    DIR* handle = ::opendir(dir.c_str());
    if (handle == nullptr) return ErrnoError(errno, "cannot list " + Quoted(dir));
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(handle)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(handle);
    return names;
  }

  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  bool IsDirectory(const std::string& path) override {
    struct stat info;
    return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
  }

  int64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void SleepForMicroseconds(int64_t micros) override {
    if (micros > 0) std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
};

}  // namespace

Env* Env::Default() {
  static Env* const env = new PosixEnv;  // never destroyed: usable until exit
  return env;
}

std::string ParentDirectory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  const size_t end = path.find_last_not_of('/', slash);
  return end == std::string::npos ? "/" : path.substr(0, end + 1);
}

StatusOr<std::string> Env::ReadFileToString(const std::string& path, uint64_t max_bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, NewSequentialFile(path));
  auto too_large = [&]() {
    return OutOfRangeError(Quoted(path), " is larger than ", max_bytes,
                           " bytes, the limit for this file");
  };
  if (file->SizeHint() > max_bytes) return too_large();
  std::string contents;
  contents.reserve(file->SizeHint());
  std::unique_ptr<char[]> chunk(new char[kIoChunk]);
  while (true) {
    ASSIGN_OR_RETURN(size_t got, file->Read(chunk.get(), kIoChunk));
    if (got == 0) break;
    if (got > max_bytes - contents.size()) return too_large();
    contents.append(chunk.get(), got);
  }
  return contents;
}

Status Env::WriteSyncedFile(const std::string& path, const std::vector<std::string_view>& pieces) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewWritableFile(path));
  Status status;
  for (std::string_view piece : pieces) {
    status = file->Append(piece);
    if (!status.ok()) break;
  }
  if (status.ok()) status = file->Sync();
  const Status closed = file->Close();
  if (status.ok()) status = closed;
  if (!status.ok()) RemoveFile(path).IgnoreError();  // best effort: the error says why
  return status;
}

Status Env::WriteFileAtomically(const std::string& path,
                                const std::vector<std::string_view>& pieces) {
  RETURN_IF_ERROR(CheckParentDirectory(path));
  const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(next_temp_id_.fetch_add(1));
  RETURN_IF_ERROR(WriteSyncedFile(temp, pieces));
  Status renamed = RenameFile(temp, path);
  if (!renamed.ok()) {
    RemoveFile(temp).IgnoreError();
    return renamed;
  }
  return SyncDirectory(ParentDirectory(path));
}

Status Env::CreateDirectories(const std::string& dir) {
  std::string partial = !dir.empty() && dir[0] == '/' ? "/" : "";
  size_t start = 0;
  while (start <= dir.size()) {
    size_t slash = dir.find('/', start);
    if (slash == std::string::npos) slash = dir.size();
    if (slash > start) {
      partial += dir.substr(start, slash - start);
      if (!IsDirectory(partial)) {
        Status created = CreateDirectory(partial);
        if (!created.ok() && created.code() != StatusCode::kAlreadyExists) return created;
        if (!IsDirectory(partial)) {
          return FailedPreconditionError(Quoted(partial), " exists and is not a directory");
        }
      }
      partial += "/";
    }
    start = slash + 1;
  }
  return Status::OK();
}

Status Env::CheckParentDirectory(const std::string& path) {
  const std::string parent = ParentDirectory(path);
  if (IsDirectory(parent)) return Status::OK();
  return InvalidArgumentError("cannot write ", Quoted(path), ": directory ", Quoted(parent),
                              FileExists(parent) ? " is not a directory" : " does not exist");
}

}  // namespace oflite
