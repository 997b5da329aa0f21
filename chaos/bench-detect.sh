#!/bin/sh
# Detection below the root's children (docs/membership.md, issue #27
# item 3): on 8 emulated hosts with a real sshd each (kary:2, 7 job hosts
# + 1 spare; node001 and node002 are the root's children), a host below
# them goes silent once every rank runs: crashed (ftcluster kill: link
# down, then everything in it SIGKILLed), cut (ftcluster partition: link
# down, nothing killed) or blackholed (iptables DROP of everything in and
# out of it). Timed here (polling every 20 ms): the fault to the root's
# "lost the agent of node" line, from the fault's command's start (an
# upper bound) and from its end (the fault is whole by then; on a loaded
# machine the command itself may take seconds). TRIALS of each, the victim rotating over
# node004 (below node001), node005 (below node002) and node007 (below
# node003, two levels down). Then the cases that must not lose anyone:
# 200 ms delay + 5 % loss on everything entering the interior host node002
# (the cluster tool's slow), and 30 % loss into node003, each for a whole
# 8 s job. Prints median and p95 with the load average (the machine's:
# figures on a shared machine are upper bounds).
# Usage: bench-detect.sh FTLAUNCH [TRIALS]   (as root; make ftcluster-bin)
# FAULTS="crash cut blackhole" and SLOW=1 (the no-false-loss cases) are
# the defaults; a slow trial prints the front-end's detection lines.
set -eu
FTL=$1
TRIALS=${2:-10}
FAULTS=${FAULTS:-crash cut blackhole}
SLOW=${SLOW:-1}
FTC="$(dirname "$0")/.bin/ftcluster"
[ "$(id -u)" = 0 ] && [ -x "$FTC" ] || { echo "bench-detect: needs root and chaos/.bin/ftcluster (make ftcluster-bin)" >&2; exit 2; }
tmp=$(mktemp -d)
ftc="$FTC -name ftbdet -prefix 10.86.0.0/24"
trap 'kill $(jobs -p) 2>/dev/null || true; $ftc down >/dev/null 2>&1 || true; pkill -9 -f "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/bench-lib.sh"

pctl() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END {i=int((NR*p+99)/100); if (i<1) i=1; print a[i]}'; }
nowms() { echo $(($(date +%s%N) / 1000000)); }

$ftc up -n 8 >/dev/null
eval "$($ftc env)"
i=1
while [ $i -le 8 ]; do echo "node00$i slots=2"; i=$((i + 1)); done >"$tmp/hosts"

# startjob: the ring application over the hosts, until every rank runs
# (its first checkpoint written).
startjob() {
	rm -rf "$tmp/ck" "$tmp/state"
	mkdir -p "$tmp/ck"
	"$FTL" run --verbose --state-dir "$tmp/state" --hostfile "$tmp/hosts" --ssh-config "$FTCLUSTER_SSH_CONFIG" --spare-nodes 1 \
		--restart rank --tree kary:2 --ppn 2 -n 14 "$FTL" ringapp --steps "$1" --step-time 10ms --dir "$tmp/ck" >"$tmp/out" 2>"$tmp/err" &
	job=$!
	i=0
	until grep -q "node table of 14 ranks published" "$tmp/err" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 3000 ] && kill -0 "$job" 2>/dev/null || { echo "bench-detect: the job did not start" >&2; cat "$tmp/err" >&2; exit 1; }
		sleep 0.02
	done
	sleep 1 # every agent joined the gossip cluster (it joins in the background)
}

# endjob: the job interrupted and gone; every host up and reachable again.
endjob() {
	kill -INT "$job" 2>/dev/null || true
	wait "$job" 2>/dev/null || true
	pkill -9 -f "$tmp/ck" 2>/dev/null || true
	for h in $(seq -f 'node%03g' 1 8); do
		$ftc exec "$h" iptables -F >/dev/null 2>&1 || true
		$ftc exec "$h" ip neigh flush all >/dev/null 2>&1 || true
	done
	ip neigh flush dev ftbdetbr 2>/dev/null || true
}

load() { cut -d' ' -f1-3 /proc/loadavg; }

t=0
for fault in $FAULTS; do
	t=0
	while [ $t -lt "$TRIALS" ]; do
		case $((t % 3)) in 0) h=node004 ;; 1) h=node005 ;; *) h=node007 ;; esac
		startjob 100000
		t0=$(nowms)
		case $fault in
		crash) $ftc kill $h >/dev/null ;;
		cut) $ftc partition $h >/dev/null ;;
		blackhole) $ftc exec $h sh -c 'iptables -I INPUT -j DROP && iptables -I OUTPUT -j DROP' >/dev/null ;;
		esac
		t1=$(nowms)
		i=0
		until grep -q "lost the agent of node $h" "$tmp/err"; do
			i=$((i + 1))
			[ $i -lt 1500 ] || { echo "bench-detect: $fault of $h not detected" >&2; cat "$tmp/err" >&2; exit 1; }
			sleep 0.02
		done
		t2=$(nowms)
		echo $((t2 - t0)) >>"$tmp/$fault"
		echo $((t2 - t1)) >>"$tmp/$fault.end"
		echo "$fault $h: $((t2 - t0)) ms from the fault's command, $((t2 - t1)) ms from its end (load $(load))" >&2
		if [ "$(tail -1 "$tmp/$fault")" -gt 2500 ]; then
			grep "gossip\|quiet\|lost the agent\|heartbeat" "$tmp/err" >&2 || true
		fi
		case $fault in
		crash) $ftc revive $h >/dev/null && endjob ;;
		cut) $ftc heal $h >/dev/null && endjob ;;
		*) endjob ;;
		esac
		t=$((t + 1))
	done
done

# slow LABEL HOST DELAY LOSS: a whole 8 s job with HOST's incoming traffic
# delayed and dropped; no agent may be declared lost.
slow() {
	startjob 800
	$ftc slow "$2" "$3" "$4" >/dev/null 2>&1 &
	sl=$!
	wait "$job" || true
	kill -INT $sl 2>/dev/null || true
	wait $sl 2>/dev/null || true
	n=$(grep -c "lost the agent of node" "$tmp/err" || true)
	echo "  $1: $n agent(s) declared lost, $(grep -c "gossip said .* was dead" "$tmp/err" || true) false death(s) from gossip kept; the job: $(grep -o 'checksum [0-9a-f]* expected [0-9a-f]*' "$tmp/out" || echo 'no result')"
	endjob
}

echo "bench-detect: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, load average $(load)"
echo "8 emulated hosts (7 + 1 spare, kary:2), ftlaunch ringapp 14 ranks under --restart rank; a host below the root's children goes silent, $TRIALS trials each:"
for fault in $FAULTS; do
	echo "  $fault to declared lost: median $(median "$tmp/$fault") ms, p95 $(pctl "$tmp/$fault" 95) ms, max $(sort -n "$tmp/$fault" | tail -1) ms from the fault's command's start (upper bound); from its end: median $(median "$tmp/$fault.end") ms, p95 $(pctl "$tmp/$fault.end" 95) ms"
done
if [ "$SLOW" = 1 ]; then
	echo "no false loss (an 8 s job):"
	slow "200 ms delay + 5 % loss into node002 (interior)" node002 200ms 0.05
	slow "30 % loss into node003 (interior)" node003 0ms 0.3
fi
echo "load average at the end: $(load)"
