/* A ring of point-to-point messages: a token starts at rank 0 and goes
   around the ring ROUNDS times (argv[1], default 3), each rank adding its
   rank to it. Rank 0 prints the token, which is ROUNDS * size*(size-1)/2. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int rank, size, rounds = argc > 1 ? atoi(argv[1]) : 3;
  long token = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int r = 0; r < rounds; r++) {
    if (rank == 0) {
      if (size > 1) {
        MPI_Send(&token, 1, MPI_LONG, next, r, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_LONG, prev, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    } else {
      MPI_Recv(&token, 1, MPI_LONG, prev, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token += rank;
      MPI_Send(&token, 1, MPI_LONG, next, r, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) printf("ring of %d ranks, %d rounds: token %ld (want %ld)\n", size, rounds, token, (long)rounds * size * (size - 1) / 2);
  MPI_Finalize();
  return 0;
}
