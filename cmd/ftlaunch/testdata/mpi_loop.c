/* mpi_loop: barriers in a loop until killed (or ITER iterations), for
   failure tests. Rank 0 prints "looping" once everyone passed MPI_Init. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int rank, iters = argc > 1 ? atoi(argv[1]) : 6000;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) { printf("looping\n"); fflush(stdout); }
  for (int i = 0; i < iters; i++) { MPI_Barrier(MPI_COMM_WORLD); usleep(10000); }
  if (argc > 2 && rank == 1) return 0; /* leaves without MPI_Finalize */
  MPI_Finalize();
  return 0;
}
