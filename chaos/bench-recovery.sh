#!/bin/sh
# The restart protocol's cost (docs/benchmarks.md): TRIALS times, a 16-rank
# ring application (ftlaunch ringapp) on --test-nodes 8 under --restart
# rank, one rank SIGKILLed once every rank runs; the root reports the time
# from the failure it saw to every agent's ranks resumed ("recovered: every
# rank runs again (N ms after the failure)"). Then --restart job with an
# MPICH program of 16 ranks, one rank killed, against a fresh launch of the
# same job (if mpicc is installed): to every rank running, and to its end.
# Reports median and p95.
# Usage: bench-recovery.sh FTLAUNCH [TRIALS]
set -eu
FTL=$1
TRIALS=${2:-20}
tmp=$(mktemp -d)
trap 'pkill -9 -f "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/bench-lib.sh"

# pctl FILE P: the P-th percentile (nearest rank) of the numbers in FILE.
pctl() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END {i=int((NR*p+99)/100); if (i<1) i=1; print a[i]}'; }

# rankpid MARKER RANK INC: the pid of that rank's incarnation, or nothing.
rankpid() {
	for p in /proc/[0-9]*; do
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "$1" || continue
		e=$(tr '\0' '\n' <"$p/environ" 2>/dev/null) || continue
		echo "$e" | grep -qx "FTLAUNCH_RANK=$2" && echo "$e" | grep -qx "FTLAUNCH_INCARNATION=$3" && { basename "$p"; return; }
	done
}

# trial NAME RANK CMD...: runs CMD in the background, kills RANK once it
# runs (after every rank published: WAIT seconds), waits for the recovery
# line, ends the job; appends the reported time to $tmp/NAME.
trial() {
	name=$1 rank=$2
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err" &
	job=$!
	pid=
	i=0
	while [ -z "$pid" ] && [ $i -lt 300 ]; do pid=$(rankpid "$tmp/ck" "$rank" 1); i=$((i + 1)); sleep 0.1; done
	[ -n "$pid" ] || { echo "$name: rank $rank never ran" >&2; cat "$tmp/err" >&2; exit 1; }
	sleep "$WAIT" # every rank holds the table (ranks are replaced only then)
	kill -9 "$pid"
	i=0
	until grep -q "recovered: every rank" "$tmp/err"; do
		i=$((i + 1))
		[ $i -lt 600 ] || { echo "$name: no recovery" >&2; cat "$tmp/err" >&2; exit 1; }
		sleep 0.05
	done
	sed -n 's/.*recovered: every rank [a-z ]*(\([0-9]*\) ms after the failure).*/\1/p' "$tmp/err" | head -1 >>"$tmp/$name"
	kill -INT "$job" 2>/dev/null || true
	wait "$job" 2>/dev/null || true
}

WAIT=1.5
t=0
while [ $t -lt "$TRIALS" ]; do
	rm -rf "$tmp/ck"
	mkdir -p "$tmp/ck"
	trial rank $((t % 16)) "$FTL" run --state-dir "$tmp/state" --restart rank --test-nodes 8 -n 16 \
		"$FTL" ringapp --steps 100000 --step-time 10ms --dir "$tmp/ck"
	t=$((t + 1))
done

echo "bench-recovery: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores"
echo "--restart rank, ftlaunch ringapp, 16 ranks on --test-nodes 8, $TRIALS trials:"
echo "  failure to every rank resumed: median $(median "$tmp/rank") ms, p95 $(pctl "$tmp/rank" 95) ms (target: median < 500, p95 < 1000)"

if command -v mpicc >/dev/null; then
	mpicc -O1 -o "$tmp/ck_loop" "$(dirname "$0")/../cmd/ftlaunch/testdata/mpi_loop.c"
	WAIT=1
	t=0
	while [ $t -lt "$TRIALS" ]; do
		mkdir -p "$tmp/ck"
		timed fresh "$FTL" run --verbose --state-dir "$tmp/state" -n 16 "$tmp/ck_loop" 1
		# when its 16 ranks ran (the verbose line's time, in ms)
		sed -n 's/.*\[ *\([0-9.]*\)s\] node [^:]*: 16 rank(s) running.*/\1/p' "$tmp/err" | awk '{print int($1*1000)}' >>"$tmp/freshrun"
		trial job $((1 + t % 15)) "$FTL" run --state-dir "$tmp/state" --restart job -n 16 "$tmp/ck_loop"
		t=$((t + 1))
	done
	echo "--restart job, MPICH (mpi_loop), 16 ranks on this machine, $TRIALS trials:"
	echo "  failure to every rank started again: median $(median "$tmp/job") ms, p95 $(pctl "$tmp/job" 95) ms"
	echo "  a fresh launch of the same job: every rank running after median $(median "$tmp/freshrun") ms, p95 $(pctl "$tmp/freshrun" 95) ms"
	echo "  a fresh launch and end of the same job (1 iteration): median $(($(median "$tmp/fresh.wall" | cut -d. -f1) / 1000)) ms"
fi
