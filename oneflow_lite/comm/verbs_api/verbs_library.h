// Loading the real libibverbs at run time.
//
// LoadVerbsLibrary() dlopens libibverbs.so.1 (never linked at build time, so
// every binary starts on machines without RDMA) and returns a VerbsApi whose
// entries call it. On a machine without the library the result is
// Unavailable("RDMA unavailable: libibverbs.so.1 not found (install rdma-core
// / libibverbs1) ..."), which callers under --comm=auto treat as "use tcp".
// Finding the library says nothing about hardware: a machine with rdma-core
// but no HCA loads fine and lists zero devices (the provider reports that).
//
// Fork safety. A process that registers memory and later forks (the launcher,
// a data-loader subprocess, popen, system()) can corrupt registered pages:
// after fork the parent's next write triggers copy-on-write and the HCA keeps
// DMA-ing into the old physical page. ibv_fork_init() marks registered ranges
// MADV_DONTFORK so the child simply lacks them. It must run before the first
// registration; LoadVerbsLibrary calls it right after dlopen when
// `fork_safe` is set (the default, because OneFlow-Lite processes may spawn
// helpers). Its cost is one madvise per registration. Setting the environment
// variable RDMAV_FORK_SAFE=1 has the same effect inside libibverbs.
//
// Thread-safe. The library, once loaded, stays loaded for the life of the
// process (it keeps process-wide state such as fork tracking and provider
// drivers); loading again returns the same library.
#ifndef ONEFLOW_LITE_COMM_VERBS_API_VERBS_LIBRARY_H_
#define ONEFLOW_LITE_COMM_VERBS_API_VERBS_LIBRARY_H_

#include <memory>
#include <string>

#include "oneflow_lite/comm/verbs_api/verbs_api.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace verbs {

struct VerbsLibraryOptions {
  // Name or path handed to dlopen.
  std::string library = "libibverbs.so.1";
  // Call ibv_fork_init() before returning (see the header comment).
  bool fork_safe = true;
};

StatusOr<std::shared_ptr<const VerbsApi>> LoadVerbsLibrary(
    const VerbsLibraryOptions& options = VerbsLibraryOptions());

}  // namespace verbs
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_VERBS_API_VERBS_LIBRARY_H_
