#!/bin/sh
# The start-up of an MPI job (MPI_Init, a barrier, MPI_Finalize) of N ranks
# on this machine, under ftlaunch and under the MPI's own launcher,
# interleaved RUNS times, with the same environment on both sides:
#   - Open MPI (mpicc.openmpi, served PMIx by ftlaunch) against its mpirun
#     (--oversubscribe, --allow-run-as-root when root), with Open MPI's
#     defaults and with OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader;
#   - MPICH (mpicc.mpich, served PMI-1) against Hydra's mpiexec.mpich.
# Reports the medians and ftlaunch's ratio to the MPI's launcher.
# Usage: bench-mpi.sh FTLAUNCH [N [RUNS]]
set -eu
FTL=$1
N=${2:-16}
RUNS=${3:-9}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/bench-lib.sh"
src="$(dirname "$0")/../cmd/ftlaunch/testdata/mpi_init.c"
mpicc.openmpi -O1 -o "$tmp/init.openmpi" "$src"
mpicc.mpich -O1 -o "$tmp/init.mpich" "$src"
root=
[ "$(id -u)" -eq 0 ] && root=--allow-run-as-root

i=0
while [ $i -lt "$RUNS" ]; do
	timed ompi_ftl "$FTL" run -n "$N" "$tmp/init.openmpi"
	timed ompi_mpirun mpirun.openmpi $root --oversubscribe -n "$N" "$tmp/init.openmpi"
	timed ob1_ftl env OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader "$FTL" run -n "$N" "$tmp/init.openmpi"
	timed ob1_mpirun env OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader mpirun.openmpi $root --oversubscribe -n "$N" "$tmp/init.openmpi"
	timed mpich_ftl "$FTL" run -n "$N" "$tmp/init.mpich"
	timed mpich_hydra mpiexec.mpich -n "$N" "$tmp/init.mpich"
	i=$((i + 1))
done

ms() { echo "$(median "$tmp/$1.wall")" | awk '{printf "%.0f", $1/1000}'; }
ratio() { awk -v a="$(median "$tmp/$1.wall")" -v b="$(median "$tmp/$2.wall")" 'BEGIN {printf "%.2f", a/b}'; }
echo "bench-mpi: MPI_Init + barrier + finalize, $N ranks on this machine, $RUNS runs each, interleaved; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo
echo "| MPI, environment | ftlaunch (median) | its own launcher (median) | ratio |"
echo "|---|---:|---:|---:|"
echo "| Open MPI, defaults | $(ms ompi_ftl) ms | $(ms ompi_mpirun) ms (mpirun) | $(ratio ompi_ftl ompi_mpirun) |"
echo "| Open MPI, pml ob1, btl self,vader | $(ms ob1_ftl) ms | $(ms ob1_mpirun) ms (mpirun) | $(ratio ob1_ftl ob1_mpirun) |"
echo "| MPICH | $(ms mpich_ftl) ms | $(ms mpich_hydra) ms (mpiexec) | $(ratio mpich_ftl mpich_hydra) |"
