#!/bin/sh
# Inside one Slurm allocation (run it under salloc -N 8 -n 16): the whole
# run of `true` on 16 ranks by ftlaunch --launcher slurm, by srun alone and
# by MPICH's mpiexec with its slurm bootstrap, interleaved, RUNS times each.
# Prints medians and ratios. Usage: bench-slurm.sh FTLAUNCH IFACE|auto [RUNS]
set -eu
FTL=$1
IFACE=$2
if [ "$IFACE" = auto ]; then # the first interface with a non-loopback IPv4 address
	IFACE=$(ip -o -4 addr show | awk '$2 != "lo" {print $2; exit}')
fi
RUNS=${3:-9}
NP=${SLURM_NTASKS:-16}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_STATE_HOME="$tmp/state"
. "$(dirname "$0")/bench-lib.sh"

i=0
while [ $i -lt "$RUNS" ]; do
	timed ftlaunch "$FTL" run --launcher slurm -n "$NP" true
	timed ftlstep "$FTL" run --launcher slurm --slurm-start step -n "$NP" true
	timed ftlflat "$FTL" run --launcher slurm --slurm-start step --tree flat -n "$NP" true
	timed ftlgroup "$FTL" run --launcher slurm --slurm-start group -n "$NP" true
	timed srun srun -n "$NP" true
	timed mpiexec mpiexec.mpich -launcher slurm -iface "$IFACE" -n "$NP" true
	i=$((i + 1))
done

f=$(median "$tmp/ftlaunch.wall")
st=$(median "$tmp/ftlstep.wall")
g=$(median "$tmp/ftlgroup.wall")
fl=$(median "$tmp/ftlflat.wall")
s=$(median "$tmp/srun.wall")
m=$(median "$tmp/mpiexec.wall")
echo "bench-slurm: \`true\` on $NP ranks in $SLURM_JOB_NODELIST ($SLURM_TASKS_PER_NODE), $RUNS runs each, interleaved; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo
echo "| launcher | median | / srun | / mpiexec |"
echo "|---|---:|---:|---:|"
awk -v f="$f" -v st="$st" -v fl="$fl" -v g="$g" -v s="$s" -v m="$m" 'BEGIN {
	printf "| ftlaunch --launcher slurm (default: --slurm-start auto, here one step for all agents) | %.1f ms | %.2f | %.2f |\n", f/1000, f/s, f/m
	printf "| ftlaunch --launcher slurm --slurm-start step (one srun step per agent, default tree) | %.1f ms | %.2f | %.2f |\n", st/1000, st/s, st/m
	printf "| ftlaunch --launcher slurm --slurm-start step --tree flat (one step per agent, all from the front-end) | %.1f ms | %.2f | %.2f |\n", fl/1000, fl/s, fl/m
	printf "| ftlaunch --launcher slurm --slurm-start group (one step for all agents) | %.1f ms | %.2f | %.2f |\n", g/1000, g/s, g/m
	printf "| srun -n N true | %.1f ms | 1.00 | %.2f |\n", s/1000, s/m
	printf "| mpiexec -launcher slurm (Hydra) | %.1f ms | %.2f | 1.00 |\n", m/1000, m/s
}'
