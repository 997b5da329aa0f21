#!/bin/sh
# Collectives combined in the launch tree against the root merging them
# all (issue #32; docs/benchmarks.md, "Collectives"): the same job with the
# agents combining (the default) and with the root merging every agent's
# part (FTLAUNCH_COLL_ROOT_MERGE=1, a hidden switch kept for this
# comparison only), on NODES test nodes x 2 ranks for each NODES of
# BENCH_NODES and each tree of BENCH_TREES: ftdemo -coll K, K allgathers of
# SIZE bytes per rank, K barriers and K rings after the node table; RUNS
# runs of each, interleaved. For each kind it reports, as medians over the
# runs: the messages the root received per collective and the bytes it
# sent down per collective (from the state log: ftlaunch inspect --json's
# collectives), and the collective's median latency as rank 0 saw it; and
# the root's CPU time for the whole job (ftlaunch --verbose's "root: ...
# of CPU time": the front-end process; with --test-nodes the agents are
# processes of their own); and the tree as it ran (auto's choice, its
# depth: a collective's latency through the tree is about a hop's cost
# times the depth, where the root's merge is one hop and N messages).
# Usage: bench-coll.sh FTLAUNCH FTDEMO
#   BENCH_NODES (default "64 128"), BENCH_TREES (default "kary:4 auto"),
#   RUNS (default 3), K (default 20), SIZE (default 1024), PPN (default 2)
set -eu
FTL=$1
DEMO=$2
NODES=${BENCH_NODES:-64 128}
TREES=${BENCH_TREES:-kary:4 auto}
RUNS=${RUNS:-3}
K=${K:-20}
SIZE=${SIZE:-1024}
PPN=${PPN:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/bench-lib.sh"

# collectives FILE: the state log's totals (inspect --json) as lines
# "kind count messages bytes".
collectives() {
	awk '
		/^  "collectives": \[/ { on = 1; next }
		on && /^  \]/ { on = 0 }
		on && /"kind":/ { gsub(/[",]/, "", $2); kind = $2 }
		on && /"count":/ { gsub(/,/, "", $2); count = $2 }
		on && /"messages_at_root":/ { gsub(/,/, "", $2); msgs = $2 }
		on && /"bytes_sent_down":/ { gsub(/,/, "", $2); print kind, count, msgs, $2 }
	' "$1"
}

# one NAME ENV...: one run of the job, its figures appended to $tmp/NAME.*
one() {
	name=$1
	shift
	rm -rf "$tmp/state"
	timed "$name" env "$@" "$FTL" run --verbose --state-dir "$tmp/state" -n "$((nodes * PPN))" --test-nodes "$nodes" --tree "$tree" "$DEMO" -coll "$K" -size "$SIZE"
	sed -n 's/.*root: \([0-9.]*\) ms of CPU time.*/\1/p' "$tmp/err" >>"$tmp/$name.cpu"
	sed -n 's/.*launching [0-9]* agent(s) for [0-9]* rank(s): \(.*\) tree of depth \([0-9]*\).*/\1, depth \2/p' "$tmp/err" | head -n 1 >"$tmp/$name.shape"
	line=$(grep '^collectives: allgather' "$tmp/out") || { echo "bench-coll: $name: no latencies from ftdemo" >&2; cat "$tmp/out" "$tmp/err" >&2; exit 1; }
	echo "$line" | sed 's/.*allgather [^;]* median \([0-9.]*\) ms.*/\1/' >>"$tmp/$name.allgather.lat"
	echo "$line" | sed 's/.*barrier [^;]* median \([0-9.]*\) ms.*/\1/' >>"$tmp/$name.barrier.lat"
	echo "$line" | sed 's/.*ring [^;]* median \([0-9.]*\) ms.*/\1/' >>"$tmp/$name.ring.lat"
	"$FTL" inspect --state-dir "$tmp/state" --json >"$tmp/inspect.json"
	collectives "$tmp/inspect.json" >"$tmp/colls"
	for kind in allgather barrier ring; do
		awk -v k="$kind" '$1 == k { printf "%.1f\n", $3 / $2 }' "$tmp/colls" >>"$tmp/$name.$kind.msgs"
		awk -v k="$kind" '$1 == k { printf "%.0f\n", $4 / $2 }' "$tmp/colls" >>"$tmp/$name.$kind.down"
	done
}

for nodes in $NODES; do
	for tree in $TREES; do
		i=0
		while [ "$i" -lt "$RUNS" ]; do
			one "tree-$nodes-$tree" FTLAUNCH_COLL_ROOT_MERGE=0
			one "root-$nodes-$tree" FTLAUNCH_COLL_ROOT_MERGE=1
			i=$((i + 1))
		done
	done
done

echo "bench-coll: ftdemo -coll $K (allgathers of $SIZE B per rank, barriers, rings) on --test-nodes NODES x $PPN ranks, $RUNS runs each, interleaved; $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo
echo "Per collective, medians over the runs: messages at the root, bytes it sent down, rank 0's median latency; the root's CPU time for the whole job."
echo
echo "| nodes | tree (as run) | merged by | root CPU | allgather: msgs, bytes down, latency | barrier: msgs, bytes down, latency | ring: msgs, bytes down, latency |"
echo "|---:|---|---|---:|---|---|---|"
for nodes in $NODES; do
	for tree in $TREES; do
		for mode in tree root; do
			name="$mode-$nodes-$tree"
			case $mode in tree) by="the tree" ;; root) by="the root" ;; esac
			row="| $nodes | $tree ($(cat "$tmp/$name.shape")) | $by | $(median "$tmp/$name.cpu") ms |"
			for kind in allgather barrier ring; do
				row="$row $(median "$tmp/$name.$kind.msgs"), $(median "$tmp/$name.$kind.down") B, $(median "$tmp/$name.$kind.lat") ms |"
			done
			echo "$row"
		done
	done
done
