/* The floor of a 2-process all-reduce over loopback TCP: one socket, one
 * thread per rank, no framing, no progress thread. Each op is the ring's
 * schedule at 2 ranks: send the other rank's half while receiving one's own
 * into scratch, add it in, then send the summed half while receiving the
 * other (spinning nonblocking send/recv, ranks bound to CPUs 0 and 1).
 * allreduce_bench's tcp ring and OpenMPI are held against it in
 * docs/benchmarks.md.
 *
 *   raw_tcp_ring [--bytes=B] [--iterations=I] [--repeats=R] [--lowat=L] [--quickack=1]
 *
 * (the flags: raw_tcp_ring_main.cc, cli::FlagSet; the ring: this file, C)
 * --lowat: SO_RCVLOWAT on both sockets (0: the kernel's default of 1);
 * --quickack=1: TCP_QUICKACK after every read that returned data. Both
 * change when the receiver acknowledges (a receiver holding less than its
 * low-water mark acknowledges at once), and both raised this loop to
 * OpenMPI's level on the 2-core VM (docs/benchmarks.md).
 * Prints, per repeat, wall and CPU time per op and the bus bandwidth
 * (2 (N - 1) / N bytes per op over the time = bytes / time at N = 2), then
 * the median and the load average. */
#define _GNU_SOURCE
#include "tools/bench/raw_tcp_ring.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_seconds(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

static void die(const char* what) {
  fprintf(stderr, "raw_tcp_ring: %s: %s\n", what, strerror(errno));
  exit(1);
}

/* Sends `n` bytes of `out` while receiving `n` into `in`, both nonblocking. */
static int g_quickack = 0;
static void swap(int fd, const char* out, char* in, size_t n) {
  size_t sent = 0, received = 0;
  while (sent < n || received < n) {
    if (sent < n) {
      ssize_t k = send(fd, out + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) sent += (size_t)k;
      else if (k < 0 && errno != EAGAIN && errno != EINTR) die("send");
    }
    if (received < n) {
      ssize_t k = recv(fd, in + received, n - received, MSG_DONTWAIT);
      if (k > 0) {
        received += (size_t)k;
        if (g_quickack) setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &g_quickack, sizeof(g_quickack));
      } else if (k == 0) { errno = ECONNRESET; die("recv"); }
      else if (errno != EAGAIN && errno != EINTR) die("recv");
    }
  }
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int raw_tcp_ring_run(const struct raw_tcp_ring_options* options) {
  const size_t bytes = options->bytes / 8 * 8;
  const int iterations = options->iterations;
  const int repeats = options->repeats;
  const int lowat = options->lowat;
  g_quickack = options->quickack != 0;
  if (bytes < 8 || iterations < 1 || repeats < 1 || repeats > RAW_TCP_RING_MAX_REPEATS) {
    fprintf(stderr, "raw_tcp_ring: need --bytes >= 8, --iterations >= 1, 1 <= --repeats <= 64\n");
    return 2;
  }
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  struct sockaddr_in address;
  memset(&address, 0, sizeof(address));
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(listener, (struct sockaddr*)&address, sizeof(address)) < 0 || listen(listener, 1) < 0 ||
      getsockname(listener, (struct sockaddr*)&address, &length) < 0) {
    die("listen");
  }
  const pid_t child = fork();
  if (child < 0) die("fork");
  const int rank = child == 0 ? 1 : 0;
  int fd;
  if (rank == 1) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr*)&address, sizeof(address)) < 0) die("connect");
  } else {
    fd = accept(listener, NULL, NULL);
    if (fd < 0) die("accept");
  }
  close(listener);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (lowat > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat)) < 0) {
    die("SO_RCVLOWAT");
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(rank, &cpus);
  const int bound = sched_setaffinity(0, sizeof(cpus), &cpus) == 0;

  const size_t half = bytes / 2 / 4 * 4;
  float* buffer = malloc(bytes);
  float* scratch = malloc(half);
  if (buffer == NULL || scratch == NULL) die("malloc");
  for (size_t i = 0; i < bytes / sizeof(float); ++i) buffer[i] = (float)(rank + 1);
  char* mine = (char*)buffer + (rank ? half : 0);
  char* theirs = (char*)buffer + (rank ? 0 : half);
  double walls[RAW_TCP_RING_MAX_REPEATS], cpus_used[RAW_TCP_RING_MAX_REPEATS];
  for (int r = 0; r < repeats; ++r) {
    const double start = now_seconds(), cpu_start = cpu_seconds();
    for (int i = 0; i < iterations; ++i) {
      swap(fd, theirs, (char*)scratch, half);
      float* sum = (float*)mine;
      for (size_t k = 0; k < half / sizeof(float); ++k) sum[k] += scratch[k];
      swap(fd, mine, theirs, half);
    }
    walls[r] = (now_seconds() - start) / iterations;
    cpus_used[r] = (cpu_seconds() - cpu_start) / iterations;
    if (rank == 0) {
      printf("repeat %d: %.1f us/op, CPU %.1f us/op, busbw %.0f MB/s\n", r, walls[r] * 1e6,
             cpus_used[r] * 1e6, bytes / walls[r] / 1e6);
    }
  }
  if (rank == 0) {
    qsort(walls, repeats, sizeof(double), compare);
    qsort(cpus_used, repeats, sizeof(double), compare);
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    printf("raw TCP ring, 2 processes%s, %zu bytes, SO_RCVLOWAT %d: median %.0f MB/s "
           "(%.1f us/op, CPU %.1f us/op); load average %.2f %.2f %.2f\n",
           bound ? " on CPUs 0 and 1" : " (unbound)", bytes, lowat > 0 ? lowat : 1,
           bytes / walls[repeats / 2] / 1e6, walls[repeats / 2] * 1e6,
           cpus_used[repeats / 2] * 1e6, load[0], load[1], load[2]);
    int status = 0;
    waitpid(child, &status, 0);
  }
  close(fd);
  free(buffer);
  free(scratch);
  return 0;
}
