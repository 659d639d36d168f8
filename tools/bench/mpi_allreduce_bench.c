/* OpenMPI's figures beside tools/bench/allreduce_bench and comm_p2p_bench:
 * the comparison peer of CommNet's shm provider. Same sizes, same sample
 * rule (iterations = clamp(8 MiB / size, 1, 32) back-to-back ops per sample,
 * or --iterations=N, each sample after MPI_Barrier and one untimed op, median of --repeats
 * samples), same busbw = 2(N-1)/N x bytes / time. MPI_Allreduce of float32
 * sums in two variants, their samples interleaved: in place (MPI_IN_PLACE)
 * and out of place (a separate send buffer: the common call, which OpenMPI
 * may run faster, as its algorithms need not copy the input aside first);
 * --variant=in_place or --variant=out_of_place times only one. With 2 ranks
 * also a windowed MPI_Isend/MPI_Irecv bandwidth and an 8-byte ping-pong
 * (--p2p=0 leaves them out). Built and started by mpi_allreduce_bench.sh
 * (mpicc, mpirun), or compiled by it (--compile_to) and started by
 * allreduce_bench once per sample (tools/bench/mpi_peer.h), which reads the
 * table's "size" header to find each variant's column. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_bench_flags.h"

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* values, int count) {
  qsort(values, count, sizeof(double), compare);
  return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

/* --iterations=N: N ops per sample; 0 (the default): the rule above. */
static int g_iterations = 0;

static int iterations_for(size_t bytes) {
  if (g_iterations > 0) return g_iterations;
  size_t n = (8u << 20) / bytes;
  return n < 1 ? 1 : n > 32 ? 32 : (int)n;
}

static void fill(float* data, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) data[i] = (float)(rank + 1);
}

static void verify(const float* data, size_t count, int world) {
  const double expected = world * (world + 1) / 2.0;
  size_t at[3] = {0, count / 2, count - 1};
  for (int i = 0; i < 3; ++i) {
    double d = data[at[i]] - expected;
    if (d < 0) d = -d;
    if (d > 1e-3 * expected) {
      fprintf(stderr, "MPI_Allreduce: wrong result %f (expected %f)\n", data[at[i]], expected);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
}

/* The variants, in the order of their columns; the column names are what
 * tools/bench/mpi_peer.h looks for. */
enum { kInPlace = 0, kOutOfPlace = 1, kVariants = 2 };
static const char* const kColumn[kVariants] = {"in-place", "out-of-place"};

/* --variant=both|in_place|out_of_place (default both) as a bit set of the
 * variants; 0 for any other value. */
static int variant_flag(int argc, char** argv) {
  const char* value = "both";
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--variant=", 10) == 0) value = argv[i] + 10;
  }
  if (strcmp(value, "both") == 0) return 1 << kInPlace | 1 << kOutOfPlace;
  if (strcmp(value, "in_place") == 0) return 1 << kInPlace;
  if (strcmp(value, "out_of_place") == 0) return 1 << kOutOfPlace;
  return 0;
}

/* One MPI_Allreduce of `count` floats: `send` into `receive` (out of place),
 * or `receive` onto itself (in place). */
static void allreduce(int variant, const float* send, float* receive, size_t count) {
  MPI_Allreduce(variant == kInPlace ? MPI_IN_PLACE : send, receive, (int)count, MPI_FLOAT,
                MPI_SUM, MPI_COMM_WORLD);
}

/* One sample: seconds per op of `iterations` back-to-back all-reduces, after
 * a barrier and one untimed op (as allreduce_bench's samples start). Rank
 * 0's clock decides, like allreduce_bench: broadcast to every rank. */
static double sample_allreduce(int variant, const float* send, float* receive, size_t count) {
  int iterations = iterations_for(count * sizeof(float));
  MPI_Barrier(MPI_COMM_WORLD);
  allreduce(variant, send, receive, count);
  double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) allreduce(variant, send, receive, count);
  double seconds = (MPI_Wtime() - start) / iterations;
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return seconds;
}

/* Rank 0 sends `total` bytes to rank 1 in messages of `size`, a window of
 * up to 64 outstanding; MB/s. */
static double p2p_bandwidth(int rank, char* buffer, size_t size) {
  size_t total = size * 16 < (32u << 20) ? (32u << 20) : size * 16;
  if (total > (256u << 20)) total = 256u << 20;
  size_t count = total / size;
  int window = (int)((16u << 20) / size);
  if (window < 2) window = 2;
  if (window > 64) window = 64;
  MPI_Request requests[64];
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (size_t sent = 0; sent < count; sent += window) {
    int batch = (int)(count - sent < (size_t)window ? count - sent : (size_t)window);
    for (int i = 0; i < batch; ++i) {
      if (rank == 0) MPI_Isend(buffer, (int)size, MPI_CHAR, 1, 0, MPI_COMM_WORLD, &requests[i]);
      else MPI_Irecv(buffer, (int)size, MPI_CHAR, 0, 0, MPI_COMM_WORLD, &requests[i]);
    }
    MPI_Waitall(batch, requests, MPI_STATUSES_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return count * size / (MPI_Wtime() - start) / 1e6;
}

static double pingpong_us(int rank, int iterations) {
  char message[8] = {0};
  double* samples = malloc(sizeof(double) * iterations);
  for (int i = 0; i < iterations; ++i) {
    double start = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(message, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
      MPI_Recv(message, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(message, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(message, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    }
    samples[i] = (MPI_Wtime() - start) * 1e6;
  }
  double result = median(samples, iterations);
  free(samples);
  return result;
}

static void size_name(size_t bytes, char* name, size_t length) {
  if (bytes >= (1u << 20)) snprintf(name, length, "%zu MiB", bytes >> 20);
  else snprintf(name, length, "%zu KiB", bytes >> 10);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const int repeats = (int)bench_flag(argc, argv, "repeats", 5);
  const size_t min_bytes = (size_t)bench_flag(argc, argv, "min_bytes", 4096);
  const size_t max_bytes = (size_t)bench_flag(argc, argv, "max_bytes", 64 << 20);
  const int variants = variant_flag(argc, argv);
  const long iterations = bench_flag(argc, argv, "iterations", 0);
  /* Which variant samples first: swapped every repeat, so neither always
   * follows the other; allreduce_bench (--repeats=1 per mpirun) alternates
   * it by sample with --out_of_place_first=1. */
  const int first = bench_flag(argc, argv, "out_of_place_first", 0) != 0 ? kOutOfPlace : kInPlace;
  /* Every rank reads the same argv, so all of them stop here alike. */
  if (variants == 0 || repeats < 1 || repeats > 1000 || min_bytes < 16 || max_bytes < min_bytes ||
      iterations < 0 || iterations > 1000000) {
    if (rank == 0) {
      fprintf(stderr,
              "mpi_allreduce_bench: bad flags: --variant must be both, in_place or out_of_place; "
              "--repeats in [1, 1000]; --iterations in [0, 1000000]; "
              "16 <= --min_bytes <= --max_bytes\n");
    }
    MPI_Finalize();
    return 2;
  }
  g_iterations = (int)iterations;
  float* buffer = malloc(max_bytes);
  float* send = (variants & 1 << kOutOfPlace) ? malloc(max_bytes) : NULL;
  if (buffer == NULL || ((variants & 1 << kOutOfPlace) && send == NULL)) {
    fprintf(stderr, "mpi_allreduce_bench: rank %d: cannot allocate 2 x %zu bytes\n", rank,
            max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double* timings[kVariants];  /* per variant, seconds per op of each repeat */
  for (int v = 0; v < kVariants; ++v) timings[v] = malloc(sizeof(double) * repeats);
  if (rank == 0) {
    printf("\nOpenMPI MPI_Allreduce busbw, %d processes, float32 sum (MB/s, medians of %d, "
           "variants' samples interleaved)\n",
           world, repeats);
    printf("%-8s", "size");
    for (int v = 0; v < kVariants; ++v) {
      if (variants & 1 << v) printf(" %14s", kColumn[v]);
    }
    if (variants == (1 << kInPlace | 1 << kOutOfPlace)) printf("  %s", "best");
    printf("\n");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    size_t count = bytes / sizeof(float);
    /* Each variant's first result is checked; the send buffer keeps rank + 1
     * for good (out of place never writes it). */
    for (int v = 0; v < kVariants; ++v) {
      if (!(variants & 1 << v)) continue;
      fill(v == kInPlace ? buffer : send, count, rank);
      allreduce(v, send, buffer, count);
      verify(buffer, count, world);
    }
    for (int r = 0; r < repeats; ++r) {
      for (int k = 0; k < kVariants; ++k) {
        int v = (first + r + k) % kVariants;
        if (variants & 1 << v) timings[v][r] = sample_allreduce(v, send, buffer, count);
      }
    }
    if (rank == 0) {
      char name[32];
      size_name(bytes, name, sizeof(name));
      printf("%-8s", name);
      double best = 0;
      int winner = kInPlace;
      for (int v = 0; v < kVariants; ++v) {
        if (!(variants & 1 << v)) continue;
        double busbw = 2.0 * (world - 1) / world * bytes / median(timings[v], repeats) / 1e6;
        printf(" %14.0f", busbw);
        if (busbw > best) best = busbw, winner = v;
      }
      if (variants == (1 << kInPlace | 1 << kOutOfPlace)) printf("  %s", kColumn[winner]);
      printf("\n");
      fflush(stdout);
    }
  }
  /* --p2p=0: the all-reduce table only (allreduce_bench's per-sample runs). */
  if (world == 2 && bench_flag(argc, argv, "p2p", 1) != 0) {
    if (rank == 0) printf("\nOpenMPI point-to-point (Isend/Irecv window), MB/s\n");
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      double samples[64];
      int n = repeats < 64 ? repeats : 64;
      for (int r = 0; r < n; ++r) samples[r] = p2p_bandwidth(rank, (char*)buffer, bytes);
      double value = median(samples, n);
      char name[32];
      size_name(bytes, name, sizeof(name));
      if (rank == 0) printf("%-8s %14.0f\n", name, value);
    }
    double rtt = pingpong_us(rank, (int)bench_flag(argc, argv, "latency_iterations", 20000));
    if (rank == 0) printf("8-byte round trip: OpenMPI %.1f us\n", rtt);
  }
  for (int v = 0; v < kVariants; ++v) free(timings[v]);
  free(send);
  free(buffer);
  MPI_Finalize();
  return 0;
}
