// Names of the framework's own threads, for people: `top -H`, `ps -L`,
// `perf report --sort comm`, gdb and /proc/PID/task/TID/comm show them.
// Without one, every thread of a rank reads "oflite" (the process name),
// and a stream thread cannot be told from a transport's progress thread or
// a collective's worker.
//
// Names used (docs/runtime.md, "Threads"): a stream thread is named by its
// stream ("m0/cpu0/s0"), a collective's worker "oflite-coll", the
// transports' progress threads "oflite-tcp", "oflite-shm", "oflite-verbs",
// the control plane's "oflite-beat" and "oflite-rdzv".
#ifndef ONEFLOW_LITE_COMMON_THREAD_NAME_H_
#define ONEFLOW_LITE_COMMON_THREAD_NAME_H_

#include <string>
#include <string_view>

namespace oflite {

// The kernel keeps at most this many bytes of a thread's name.
inline constexpr size_t kMaxThreadNameBytes = 15;

// Names the calling thread; a longer name keeps its first
// kMaxThreadNameBytes bytes. Best effort: a failure changes nothing.
void NameThisThread(std::string_view name);

// The calling thread's name ("" if it cannot be read).
std::string ThisThreadName();

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_THREAD_NAME_H_
