/* Two MPI ranks: a checked ping-pong of 64 KiB messages and an allreduce; prints
 * "mpi_pingpong: ok, ranks on HOST0 and HOST1" from rank 0 when every byte and sum is right. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs 2 ranks, got %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  enum { kLen = 65536, kRounds = 200 };
  unsigned char* buf = malloc(kLen);
  long bad = 0;
  for (int r = 0; r < kRounds; ++r) {
    if (rank == 0) {
      for (int i = 0; i < kLen; ++i) buf[i] = (unsigned char)(i * 7 + r);
      MPI_Send(buf, kLen, MPI_BYTE, 1, r, MPI_COMM_WORLD);
      MPI_Recv(buf, kLen, MPI_BYTE, 1, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < kLen; ++i) bad += buf[i] != (unsigned char)(i * 7 + r + 1);
    } else {
      MPI_Recv(buf, kLen, MPI_BYTE, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < kLen; ++i) buf[i] = (unsigned char)(buf[i] + 1);
      MPI_Send(buf, kLen, MPI_BYTE, 0, r, MPI_COMM_WORLD);
    }
  }
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  char host[MPI_MAX_PROCESSOR_NAME] = {0}, other[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  if (rank == 1) MPI_Send(host, sizeof(host), MPI_CHAR, 0, 9999, MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_Recv(other, sizeof(other), MPI_CHAR, 1, 9999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (bad == 0 && sum == 2)
      printf("mpi_pingpong: ok, ranks on %s and %s\n", host, other);
    else
      printf("mpi_pingpong: FAILED: %ld bad bytes, allreduce %d\n", bad, sum);
  }
  free(buf);
  MPI_Finalize();
  return bad == 0 && sum == 2 ? 0 : 1;
}
