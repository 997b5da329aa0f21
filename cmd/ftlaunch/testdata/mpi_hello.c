#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int rank, size, len; char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(name, &len);
  int sum = 0; MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int b = rank == 0 ? 42 : 0; MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int p = 0; p < size; p++) if (p != rank) {
    int x = rank, y = -1;
    MPI_Sendrecv(&x, 1, MPI_INT, p, 0, &y, 1, MPI_INT, p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (y != p) { fprintf(stderr, "bad p2p %d<-%d\n", rank, p); MPI_Abort(MPI_COMM_WORLD, 3); }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (argc > 1 && rank == 1) MPI_Abort(MPI_COMM_WORLD, atoi(argv[1]));
  if (rank == 0) printf("hello from %d ranks, allreduce sum %d (want %d), bcast %d\n", size, sum, size*(size-1)/2, b);
  MPI_Finalize();
  return 0;
}
