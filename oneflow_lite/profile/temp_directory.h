// A private directory under $TMPDIR (default /tmp) for one measurement's
// files (the transport ranks' logs, an in-situ run's trace), removed with
// its contents when the object goes. Not thread-safe; one owner.
#ifndef ONEFLOW_LITE_PROFILE_TEMP_DIRECTORY_H_
#define ONEFLOW_LITE_PROFILE_TEMP_DIRECTORY_H_

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace profile {

class TempDirectory {
 public:
  TempDirectory() = default;
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  ~TempDirectory() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  // Makes the directory "<tmp>/<prefix>-XXXXXX"; Unavailable naming the
  // pattern when it cannot.
  Status Create(const std::string& prefix) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/" + prefix +
                          "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return UnavailableError("cannot create a directory like '", pattern,
                              "': ", std::strerror(errno));
    }
    path_ = pattern;
    return Status::OK();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace profile
}  // namespace oflite

#endif  // ONEFLOW_LITE_PROFILE_TEMP_DIRECTORY_H_
