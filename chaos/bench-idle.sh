#!/bin/sh
# The idle cost of a running job's agents (docs/benchmarks.md): a job of
# N ranks of `sleep` on --test-nodes N (one agent each, gossip and tree
# heartbeats running, nothing else to do); after SETTLE seconds the CPU
# time (user + system) of every agent process is read from /proc, again
# WINDOW seconds later; prints the total over the window and per agent.
# With a second binary (an older build, say one without gossip), the same
# for it, interleaved, ROUNDS times each.
# Usage: bench-idle.sh FTLAUNCH [OTHER-FTLAUNCH] (N=32 WINDOW=10 ROUNDS=3)
set -eu
N=${N:-32}
WINDOW=${WINDOW:-10}
SETTLE=${SETTLE:-3}
ROUNDS=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'pkill -9 -f "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT
hz=$(getconf CLK_TCK)

# agentticks BIN: the CPU ticks (utime + stime) of the live agents of BIN.
agentticks() {
	t=0
	for p in $(pgrep -f "^$1 agent"); do
		s=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) || continue
		t=$((t + s))
	done
	echo $t
}

# measure LABEL BIN: one job, its agents' CPU over the window.
measure() {
	label=$1 bin=$2
	cp "$bin" "$tmp/ftl-$label"
	b="$tmp/ftl-$label"
	"$b" run --state-dir "$tmp/state" --test-nodes "$N" -n "$N" sleep $((SETTLE + WINDOW + 5)) >/dev/null 2>"$tmp/err-$label" &
	job=$!
	sleep "$SETTLE"
	n=$(pgrep -c -f "^$b agent" || true)
	t0=$(agentticks "$b")
	sleep "$WINDOW"
	t1=$(agentticks "$b")
	wait "$job" || { cat "$tmp/err-$label" >&2; exit 1; }
	ms=$(((t1 - t0) * 1000 / hz))
	echo "$label: $n agents, ${ms} ms of CPU in ${WINDOW} s ($(awk -v m="$ms" -v n="$n" -v w="$WINDOW" 'BEGIN {printf "%.2f", m / n / w / 10}')% of a core per agent)"
}

echo "bench-idle: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $N agents, ${WINDOW} s window"
r=0
while [ $r -lt "$ROUNDS" ]; do
	measure this "$1"
	[ $# -lt 2 ] || measure other "$2"
	r=$((r + 1))
done
