#!/bin/sh
# The cost of the job's state log: the demo on --test-nodes 4 with 16 ranks
# under --replicas 1 and --replicas 3 (and, if given, an ftlaunch built
# before the state log existed), interleaved RUNS times. Reports the median
# time to the node table (the launch, as the demo measures it) and of the
# whole run. Usage: bench-replicas.sh FTLAUNCH FTDEMO [RUNS [OLD-FTLAUNCH]]
set -eu
FTL=$1
DEMO=$2
RUNS=${3:-15}
OLD=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/bench-lib.sh"

run() { # name, command...: also keeps the demo's node-table time
	timed "$@"
	sed -n 's/.*node table after \([0-9.]*\) ms.*/\1/p' "$tmp/out" >>"$tmp/$1.table"
}

i=0
while [ $i -lt "$RUNS" ]; do
	[ -n "$OLD" ] && run before "$OLD" run --test-nodes 4 -n 16 "$DEMO"
	run r1 "$FTL" run --state-dir "$tmp/state" --replicas 1 --test-nodes 4 -n 16 "$DEMO"
	run r3 "$FTL" run --state-dir "$tmp/state" --replicas 3 --test-nodes 4 -n 16 "$DEMO"
	i=$((i + 1))
done

echo "bench-replicas: ftdemo, 16 ranks on --test-nodes 4, $RUNS runs each, interleaved; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo
echo "| ftlaunch | node table (median) | whole run (median) |"
echo "|---|---:|---:|"
for n in before r1 r3; do
	[ -f "$tmp/$n.wall" ] || continue
	case $n in before) label="before the state log" ;; r1) label="--replicas 1" ;; r3) label="--replicas 3" ;; esac
	printf '| %s | %s ms | %.1f ms |\n' "$label" "$(median "$tmp/$n.table")" "$(echo "$(median "$tmp/$n.wall")" | awk '{print $1/1000}')"
done
