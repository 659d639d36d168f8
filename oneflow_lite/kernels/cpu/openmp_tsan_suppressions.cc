// ThreadSanitizer and GNU OpenMP: libgomp is not built with the sanitizer,
// so tsan cannot see the synchronization that starts and ends an OpenMP
// team (futexes inside libgomp). Every read of the team's shared arguments
// by a worker then looks like a race with the thread that wrote them before
// the parallel region, in our kernels and inside oneDNN alike. A tsan build
// therefore suppresses reports with libgomp on a stack; our own threads
// (actors, streams, transports) stay checked. The kernels' threads write
// disjoint ranges, which the bit-identity tests across thread counts check
// in the ordinary build.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  return "race:libgomp.so\n";
}
#endif
