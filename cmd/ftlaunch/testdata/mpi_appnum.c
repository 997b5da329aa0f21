/* Prints what an MPI rank learns of its place in the job: rank and size of
   MPI_COMM_WORLD, MPI_APPNUM (the MPMD block), its rank and size among the
   ranks of its node (MPI_COMM_TYPE_SHARED), and the variables wrapper
   scripts read for the same. One line per rank, in one write. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static const char *env(const char *k) { const char *v = getenv(k); return v ? v : "-"; }
int main(int argc, char **argv) {
  int rank, size, flag, *appnum, lrank, lsize;
  MPI_Comm node;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &lrank); MPI_Comm_size(node, &lsize);
  MPI_Barrier(MPI_COMM_WORLD);
  printf("%s rank=%d size=%d appnum=%d local=%d/%d MPI_LOCALRANKID=%s MPI_LOCALNRANKS=%s OMPI=%s/%s:%s/%s\n",
         argc > 1 ? argv[1] : "prog", rank, size, flag ? *appnum : -1, lrank, lsize,
         env("MPI_LOCALRANKID"), env("MPI_LOCALNRANKS"), env("OMPI_COMM_WORLD_RANK"), env("OMPI_COMM_WORLD_SIZE"),
         env("OMPI_COMM_WORLD_LOCAL_RANK"), env("OMPI_COMM_WORLD_LOCAL_SIZE"));
  MPI_Comm_free(&node);
  MPI_Finalize();
  return 0;
}
