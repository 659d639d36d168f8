/* OpenMPI's figures beside tools/bench/allreduce_bench and comm_p2p_bench:
 * the comparison peer of CommNet's shm provider. Same sizes, same sample
 * rule (iterations = clamp(8 MiB / size, 1, 32) back-to-back ops per sample,
 * median of --repeats samples, one warm-up), same busbw = 2(N-1)/N x bytes /
 * time. MPI_Allreduce of float32 sums in place; with 2 ranks also a
 * windowed MPI_Isend/MPI_Irecv bandwidth and an 8-byte ping-pong (--p2p=0
 * leaves them out). Built and started by mpi_allreduce_bench.sh (mpicc,
 * mpirun), or compiled by it (--compile_to) and started by allreduce_bench
 * once per sample (tools/bench/mpi_peer.h). */
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

static int iterations_for(size_t bytes) {
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

static double time_allreduce(float* buffer, size_t count, int repeats) {
  int iterations = iterations_for(count * sizeof(float));
  double* samples = malloc(sizeof(double) * repeats);
  MPI_Allreduce(MPI_IN_PLACE, buffer, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations; ++i) {
      MPI_Allreduce(MPI_IN_PLACE, buffer, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    samples[r] = (MPI_Wtime() - start) / iterations;
  }
  double result = median(samples, repeats);
  free(samples);
  /* Rank 0's figure decides, like allreduce_bench. */
  MPI_Bcast(&result, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return result;
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
  float* buffer = malloc(max_bytes);
  if (rank == 0) {
    printf("\nOpenMPI MPI_Allreduce busbw, %d processes, float32 sum (MB/s, medians of %d)\n",
           world, repeats);
    printf("%-8s %14s\n", "size", "OpenMPI");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    size_t count = bytes / sizeof(float);
    fill(buffer, count, rank);
    MPI_Allreduce(MPI_IN_PLACE, buffer, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    verify(buffer, count, world);
    double seconds = time_allreduce(buffer, count, repeats);
    if (rank == 0) {
      char name[32];
      size_name(bytes, name, sizeof(name));
      printf("%-8s %14.0f\n", name, 2.0 * (world - 1) / world * bytes / seconds / 1e6);
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
  free(buffer);
  MPI_Finalize();
  return 0;
}
