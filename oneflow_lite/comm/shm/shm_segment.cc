#include "oneflow_lite/comm/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace oflite {
namespace comm {
namespace shm {

StatusOr<std::unique_ptr<SharedMapping>> SharedMapping::Create(const std::string& name,
                                                               size_t size) {
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return UnavailableError("memfd_create(", name, "): ", std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int error = errno;
    ::close(fd);
    return ResourceExhaustedError("sizing shared memory ", name, " to ", size,
                                  " bytes: ", std::strerror(error));
  }
  struct stat info {};
  void* data = ::fstat(fd, &info) == 0
                   ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                   : MAP_FAILED;
  if (data == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    return ResourceExhaustedError("mapping shared memory ", name, " (", size,
                                  " bytes): ", std::strerror(error));
  }
  return std::unique_ptr<SharedMapping>(
      new SharedMapping(fd, static_cast<uint8_t*>(data), size, info.st_ino));
}

StatusOr<std::unique_ptr<SharedMapping>> SharedMapping::Adopt(int fd, size_t min_size,
                                                              const std::string& peer) {
  struct stat info;
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
      ::fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) < min_size) {
    ::close(fd);
    return PermissionDeniedError(peer,
                                 " sent a shared-memory object that is not a sealed memfd"
                                 " of at least ",
                                 min_size, " bytes");
  }
  const size_t size = static_cast<size_t>(info.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    return ResourceExhaustedError("mapping shared memory from ", peer, ": ", std::strerror(error));
  }
  return std::unique_ptr<SharedMapping>(
      new SharedMapping(fd, static_cast<uint8_t*>(data), size, info.st_ino));
}

SharedMapping::~SharedMapping() {
  ::munmap(data_, size_);
  CloseFd();
}

void SharedMapping::CloseFd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace shm
}  // namespace comm
}  // namespace oflite
