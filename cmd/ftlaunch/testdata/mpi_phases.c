// mpi_hello with wall-clock stamps: every rank prints to stderr
//   T rank start init_done coll_done p2p_done barrier_done finalize_done
// (seconds since the epoch), to split a run into phases (docs/benchmarks.md).
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t; clock_gettime(CLOCK_REALTIME,&t); return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc, char **argv) {
  double t0 = now();
  int rank, size, len; char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Init(&argc, &argv);
  double t1 = now();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(name, &len);
  int sum = 0; MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int b = rank == 0 ? 42 : 0; MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
  double t2 = now();
  for (int p = 0; p < size; p++) if (p != rank) {
    int x = rank, y = -1;
    MPI_Sendrecv(&x, 1, MPI_INT, p, 0, &y, 1, MPI_INT, p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (y != p) { fprintf(stderr, "bad p2p %d<-%d\n", rank, p); MPI_Abort(MPI_COMM_WORLD, 3); }
  }
  double t3 = now();
  MPI_Barrier(MPI_COMM_WORLD);
  double t4 = now();
  MPI_Finalize();
  double t5 = now();
  fprintf(stderr, "T %d %.6f %.6f %.6f %.6f %.6f %.6f\n", rank, t0, t1, t2, t3, t4, t5);
  return 0;
}
