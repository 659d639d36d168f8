/* The bare 2-process TCP ring of raw_tcp_ring.c, callable from its C++ main
 * (raw_tcp_ring_main.cc parses the flags with cli::FlagSet). */
#ifndef TOOLS_BENCH_RAW_TCP_RING_H_
#define TOOLS_BENCH_RAW_TCP_RING_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most repeats one run keeps samples for. */
#define RAW_TCP_RING_MAX_REPEATS 64

struct raw_tcp_ring_options {
  size_t bytes;   /* per all-reduce, rounded down to a multiple of 8 (>= 8) */
  int iterations; /* all-reduces per repeat (>= 1) */
  int repeats;    /* 1 .. RAW_TCP_RING_MAX_REPEATS */
  int lowat;      /* SO_RCVLOWAT on both sockets; 0: the kernel's default */
  int quickack;   /* non-zero: TCP_QUICKACK after every read that returned data */
};

/* Forks rank 1, runs the ring on both ranks and prints rank 0's figures
 * (raw_tcp_ring.c says which). Returns the process exit code: 0, 2 for
 * options out of range, or exits 1 on a socket error. Call before any
 * thread exists. */
int raw_tcp_ring_run(const struct raw_tcp_ring_options* options);

#ifdef __cplusplus
}
#endif

#endif /* TOOLS_BENCH_RAW_TCP_RING_H_ */
