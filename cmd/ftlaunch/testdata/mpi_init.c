/* MPI_Init, a barrier and MPI_Finalize: the start-up cost of an MPI job
   (make bench-mpi). */
#include <mpi.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
