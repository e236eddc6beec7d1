/* Two MPI ranks: a timed ping-pong of SIZE-byte messages (default 65536), ROUNDS rounds
 * (default 2000) after 100 unmeasured ones. Rank 0 prints
 * "mpi_pingpong SIZE bytes: LAT us one way, BW MB/s" (one way = half the round trip;
 * MB/s = SIZE / one-way time). Arguments: [SIZE [ROUNDS]]. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs 2 ranks, got %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int len = argc > 1 ? atoi(argv[1]) : 65536;
  const int rounds = argc > 2 ? atoi(argv[2]) : 2000;
  const int warmup = 100;
  char* buf = calloc(1, len > 0 ? (size_t)len : 1);
  double start = 0;
  for (int r = 0; r < warmup + rounds; ++r) {
    if (r == warmup) {
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    if (rank == 0) {
      MPI_Send(buf, len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, len, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, len, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, len, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
  }
  const double one_way_us = (MPI_Wtime() - start) * 1e6 / rounds / 2;
  if (rank == 0)
    printf("mpi_pingpong %d bytes: %.3f us one way, %.2f MB/s\n", len, one_way_us,
           len / one_way_us);
  free(buf);
  MPI_Finalize();
  return 0;
}
