#!/bin/sh
# The restart protocol's cost (docs/benchmarks.md): TRIALS times, a 16-rank
# ring application (ftlaunch ringapp) on --test-nodes 8 under --restart
# rank, one rank SIGKILLed once every rank runs; the root reports the time
# from the failure it saw to every agent's ranks resumed ("recovered: every
# rank runs again (N ms after the failure)"). Then --restart job with an
# MPICH program of 16 ranks, one rank killed, against a fresh launch of the
# same job (if mpicc is installed): to every rank running, and to its end;
# and the same program on test nodes with an agent SIGKILLed.
# Then a second root failover (--replicas 3: the front-end, then its
# successor). Reports median and p95.
# Usage: bench-recovery.sh FTLAUNCH [TRIALS]
# CASES picks the parts (default all): rank agents second mpi hostcrash.
set -eu
FTL=$1
TRIALS=${2:-20}
CASES=${CASES:-rank agents second mpi hostcrash}
# want CASE: whether CASES names it.
want() { case " $CASES " in *" $1 "*) return 0 ;; esac; return 1; }
tmp=$(mktemp -d)
trap 'pkill -9 -f "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/bench-lib.sh"

# pctl FILE P: the P-th percentile (nearest rank) of the numbers in FILE.
pctl() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END {i=int((NR*p+99)/100); if (i<1) i=1; print a[i]}'; }

# procwith MARKER VAR=VALUE...: the pid of a process with MARKER in its
# command line and every VAR=VALUE in its environment, or nothing.
procwith() {
	m=$1
	shift
	for p in /proc/[0-9]*; do
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q "$m" || continue
		e=$(tr '\0' '\n' 2>/dev/null <"$p/environ") || continue
		ok=1
		for kv in "$@"; do echo "$e" | grep -qx "$kv" || { ok= && break; }; done
		[ -n "$ok" ] && { basename "$p"; return; }
	done
}

# rankpid MARKER RANK INC: the pid of that rank's incarnation, or nothing.
rankpid() { procwith "$1" "FTLAUNCH_RANK=$2" "FTLAUNCH_INCARNATION=$3"; }

# nodeagent NODE: the pid of the agent of test node NODE (the parent of
# one of its ranks), or nothing.
nodeagent() {
	p=$(procwith "$tmp/ck" "FTLAUNCH_NODE=$1")
	[ -z "$p" ] || awk '{print $4}' "/proc/$p/stat" 2>/dev/null
}

# nowms: the clock in ms.
nowms() { echo $(($(date +%s%N) / 1000000)); }

# trial NAME SIGNAL FIND CMD...: runs CMD in the background; once FIND (a
# command that prints the victim's pid) finds it and every rank published
# (WAIT seconds: ranks are replaced only then), sends it SIGNAL, waits for
# the root's recovery line and ends the job. It appends the root's own
# figure ("N ms after the failure") to $tmp/NAME, and, timed here (polling
# every 20 ms), the ms from the signal to the root's "lost the agent" line
# (to the recovery if there is none) to $tmp/NAME.detect and to the
# recovery to $tmp/NAME.resume.
trial() {
	name=$1 sig=$2 find=$3
	shift 3
	"$@" >"$tmp/out" 2>"$tmp/err" &
	job=$!
	pid=
	i=0
	while [ -z "$pid" ] && [ $i -lt 300 ]; do pid=$(eval "$find"); i=$((i + 1)); sleep 0.1; done
	[ -n "$pid" ] || { echo "$name: $find found nothing" >&2; cat "$tmp/err" >&2; exit 1; }
	sleep "$WAIT"
	t0=$(nowms)
	kill -"$sig" "$pid"
	lost= i=0
	until grep -q "recovered: every rank" "$tmp/err"; do
		[ -n "$lost" ] || ! grep -q "lost the agent of node" "$tmp/err" || lost=$(nowms)
		i=$((i + 1))
		[ $i -lt 1500 ] || { echo "$name: no recovery" >&2; cat "$tmp/err" >&2; exit 1; }
		sleep 0.02
	done
	t1=$(nowms)
	[ -n "$lost" ] || lost=$t1
	sed -n 's/.*recovered: every rank [a-z ]*(\([0-9]*\) ms after the failure).*/\1/p' "$tmp/err" | head -1 >>"$tmp/$name"
	echo $((lost - t0)) >>"$tmp/$name.detect"
	echo $((t1 - t0)) >>"$tmp/$name.resume"
	kill -CONT "$pid" 2>/dev/null || true
	kill -INT "$job" 2>/dev/null || true
	wait "$job" 2>/dev/null || true
}

echo "bench-recovery: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if want rank; then
WAIT=1.5
t=0
while [ $t -lt "$TRIALS" ]; do
	rm -rf "$tmp/ck"
	mkdir -p "$tmp/ck"
	trial rank KILL "rankpid $tmp/ck $((t % 16)) 1" "$FTL" run --state-dir "$tmp/state" --restart rank --test-nodes 8 -n 16 \
		"$FTL" ringapp --steps 100000 --step-time 10ms --dir "$tmp/ck"
	t=$((t + 1))
done
echo "--restart rank, ftlaunch ringapp, 16 ranks on --test-nodes 8, $TRIALS trials:"
echo "  failure to every rank resumed: median $(median "$tmp/rank") ms, p95 $(pctl "$tmp/rank" 95) ms (target: median < 500, p95 < 1000)"
fi

if want agents; then
WAIT=1.5
t=0
while [ $t -lt "$TRIALS" ]; do
	rm -rf "$tmp/ck"
	mkdir -p "$tmp/ck"
	trial agentkill KILL "nodeagent node2" "$FTL" run --verbose --state-dir "$tmp/state" --restart rank --test-nodes 8 --tree flat -n 16 \
		"$FTL" ringapp --steps 100000 --step-time 10ms --dir "$tmp/ck"
	rm -rf "$tmp/ck"
	mkdir -p "$tmp/ck"
	# node0 under kary:2 on 8 nodes: a child of the root with node2 and
	# node3 below it, which move to their backup parent.
	trial interior KILL "nodeagent node0" "$FTL" run --verbose --state-dir "$tmp/state" --restart rank --test-nodes 8 --tree kary:2 -n 16 \
		"$FTL" ringapp --steps 100000 --step-time 10ms --dir "$tmp/ck"
	rm -rf "$tmp/ck"
	mkdir -p "$tmp/ck"
	trial agentstop STOP "nodeagent node2" "$FTL" run --verbose --state-dir "$tmp/state" --restart rank --test-nodes 9 --spare-nodes 1 --tree flat -n 16 \
		"$FTL" ringapp --steps 100000 --step-time 10ms --dir "$tmp/ck"
	t=$((t + 1))
done
echo "lost agents, ftlaunch ringapp, 16 ranks on --test-nodes 8 (--tree flat), $TRIALS trials each:"
echo "  agent SIGKILL to declared lost: median $(median "$tmp/agentkill.detect") ms, p95 $(pctl "$tmp/agentkill.detect" 95) ms"
echo "  agent SIGKILL to every rank resumed: median $(median "$tmp/agentkill.resume") ms, p95 $(pctl "$tmp/agentkill.resume" 95) ms (target < 1000)"
echo "  interior agent SIGKILL (kary:2, its 2 children move to their backup) to every rank resumed: median $(median "$tmp/interior.resume") ms, p95 $(pctl "$tmp/interior.resume" 95) ms (target < 1000)"
echo "  agent SIGSTOP (a hung node; + 1 spare) to declared lost: median $(median "$tmp/agentstop.detect") ms, p95 $(pctl "$tmp/agentstop.detect" 95) ms (target < 2500)"
echo "  agent SIGSTOP to every rank resumed on the spare: median $(median "$tmp/agentstop.resume") ms, p95 $(pctl "$tmp/agentstop.resume" 95) ms (target < 3000)"
fi

# The second root failover: --replicas 3, the front-end SIGKILLed; once
# the successor refilled the group (a replica in the front-end's voter's
# place joined), the successor (its agent) is SIGKILLed too. Timed here
# (polling every 20 ms): the kill to the next replica agent's "took over
# as root" in the job's log (the new root serving: it adopts the root's
# children from then on), and to every rank resumed (the lost successor's
# ranks started again).
# rootlog: the successor roots' log of the job in $tmp/fo.
rootlog() { cat "$tmp"/fo/ft-*/output/ftlaunch.log 2>/dev/null || true; }
# waitlog PATTERN COUNT: until the roots' log has COUNT lines with PATTERN.
waitlog() {
	i=0
	until [ "$(rootlog | grep -c "$1")" -ge "$2" ]; do
		i=$((i + 1))
		[ $i -lt 1500 ] || { echo "failover: no '$1' x$2" >&2; rootlog >&2; exit 1; }
		sleep 0.02
	done
}
if want second; then
t=0
while [ $t -lt "$TRIALS" ]; do
	rm -rf "$tmp/ck" "$tmp/fo"
	mkdir -p "$tmp/ck"
	"$FTL" run --verbose --state-dir "$tmp/fo" --replicas 3 --restart rank --test-nodes 6 --tree flat -n 12 \
		"$FTL" ringapp --steps 1200 --step-time 10ms --dir "$tmp/ck" >"$tmp/out" 2>"$tmp/err" &
	job=$!
	i=0
	until [ "$(grep -c "joined the group" "$tmp/err")" -ge 2 ]; do
		i=$((i + 1))
		[ $i -lt 1500 ] || { echo "failover: no replica group" >&2; cat "$tmp/err" >&2; exit 1; }
		sleep 0.02
	done
	kill -KILL "$job"
	wait "$job" 2>/dev/null || true
	waitlog "took over as root" 1
	waitlog "hosts a replica in place of the lost front-end's" 1
	waitlog "root replica on .* joined the group" 1
	first=$(rootlog | sed -n 's/.*node \([^ ]*\) took over as root.*/\1/p' | head -1)
	pid=$(nodeagent "$first")
	[ -n "$pid" ] || { echo "failover: no agent of $first" >&2; exit 1; }
	before=$(rootlog | grep -c "recovered: every rank runs again" || true)
	t0=$(nowms)
	kill -KILL "$pid"
	waitlog "took over as root" 2
	echo $(($(nowms) - t0)) >>"$tmp/second.serving"
	waitlog "recovered: every rank runs again" $((before + 1))
	echo $(($(nowms) - t0)) >>"$tmp/second.resume"
	"$FTL" attach --state-dir "$tmp/fo" >/dev/null 2>&1 || true
	t=$((t + 1))
done
echo "second root failover, --replicas 3 --restart rank, ftlaunch ringapp, 12 ranks on --test-nodes 6 (--tree flat), $TRIALS trials:"
echo "  successor SIGKILL to the next root serving: median $(median "$tmp/second.serving") ms, p95 $(pctl "$tmp/second.serving" 95) ms (target < 3000)"
echo "  successor SIGKILL to every rank resumed: median $(median "$tmp/second.resume") ms, p95 $(pctl "$tmp/second.resume" 95) ms"
fi

if want mpi && command -v mpicc.mpich >/dev/null; then
	mpicc.mpich -O1 -o "$tmp/ck_loop" "$(dirname "$0")/../cmd/ftlaunch/testdata/mpi_loop.c"
	WAIT=1
	t=0
	while [ $t -lt "$TRIALS" ]; do
		mkdir -p "$tmp/ck"
		timed fresh "$FTL" run --verbose --state-dir "$tmp/state" -n 16 "$tmp/ck_loop" 1
		# when its 16 ranks ran (the verbose line's time, in ms)
		sed -n 's/.*\[ *\([0-9.]*\)s\] node [^:]*: 16 rank(s) running.*/\1/p' "$tmp/err" | awk '{print int($1*1000)}' >>"$tmp/freshrun"
		trial job KILL "rankpid $tmp/ck $((1 + t % 15)) 1" "$FTL" run --state-dir "$tmp/state" --restart job -n 16 "$tmp/ck_loop"
		# An agent SIGKILLed (no node table: MPI never has one): it starts
		# again on its node once fenced, then every rank (#26).
		trial jobagent KILL "nodeagent node2" "$FTL" run --verbose --state-dir "$tmp/state" --restart job --test-nodes 8 --tree flat -n 16 "$tmp/ck_loop"
		t=$((t + 1))
	done
	echo "--restart job, MPICH (mpi_loop), 16 ranks on this machine, $TRIALS trials:"
	echo "  failure to every rank started again: median $(median "$tmp/job") ms, p95 $(pctl "$tmp/job" 95) ms"
	echo "  a fresh launch of the same job: every rank running after median $(median "$tmp/freshrun") ms, p95 $(pctl "$tmp/freshrun" 95) ms"
	echo "  a fresh launch and end of the same job (1 iteration): median $(($(median "$tmp/fresh.wall" | cut -d. -f1) / 1000)) ms"
	echo "--restart job, MPICH (mpi_loop), 16 ranks on --test-nodes 8 (--tree flat), an agent SIGKILLed, $TRIALS trials:"
	echo "  agent SIGKILL to declared lost: median $(median "$tmp/jobagent.detect") ms, p95 $(pctl "$tmp/jobagent.detect" 95) ms"
	echo "  agent SIGKILL to every rank started again: median $(median "$tmp/jobagent.resume") ms, p95 $(pctl "$tmp/jobagent.resume" 95) ms (target < 1000)"
fi

# A host crashed (#26, root only): --restart job, MPICH's checkpoint
# program, 16 ranks on 8 emulated hosts with a real sshd each + 1 spare
# (kary:2); once every rank wrote its first checkpoint, the leaf host
# node008 crashes (link down, then every process in it SIGKILLed: peers see
# silence). Reported as two parts: the crash to the root's "lost the agent"
# line (detection, timed here, polling every 20 ms), and the root's own
# figure from that failure to every rank started again (on the spare),
# which includes the fence of the silent host.
FTC="$(dirname "$0")/.bin/ftcluster"
if want hostcrash && [ "$(id -u)" = 0 ] && command -v mpicc.mpich >/dev/null && [ -x "$FTC" ]; then
	ftc="$FTC -name ftbrec -prefix 10.85.0.0/24"
	trap '$ftc down >/dev/null 2>&1 || true; pkill -9 -f "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT
	$ftc up -n 9 >/dev/null
	eval "$($ftc env)"
	mpicc.mpich -O1 -o "$tmp/mpi_ckpt" "$(dirname "$0")/../cmd/ftlaunch/testdata/mpi_ckpt.c"
	i=1
	while [ $i -le 9 ]; do echo "node00$i slots=2"; i=$((i + 1)); done >"$tmp/hosts"
	t=0
	while [ $t -lt "$TRIALS" ]; do
		rm -rf "$tmp/ckc"
		mkdir -p "$tmp/ckc"
		"$FTL" run --verbose --state-dir "$tmp/state" --hostfile "$tmp/hosts" --ssh-config "$FTCLUSTER_SSH_CONFIG" --spare-nodes 1 \
			--restart job --tree kary:2 --ppn 2 -n 16 "$tmp/mpi_ckpt" "$tmp/ckc" 100000 10 >"$tmp/out" 2>"$tmp/err" &
		job=$!
		i=0
		until [ "$(ls "$tmp/ckc" | grep -c '^rank-[0-9]*$')" -ge 16 ]; do
			i=$((i + 1))
			[ $i -lt 6000 ] || { echo "hostcrash: no first checkpoint" >&2; cat "$tmp/err" >&2; exit 1; }
			sleep 0.02
		done
		t0=$(nowms)
		$ftc kill node008 >/dev/null
		lost= i=0
		until grep -q "recovered: every rank" "$tmp/err"; do
			[ -n "$lost" ] || ! grep -q "lost the agent of node node008" "$tmp/err" || lost=$(nowms)
			i=$((i + 1))
			[ $i -lt 3000 ] || { echo "hostcrash: no recovery" >&2; cat "$tmp/err" >&2; exit 1; }
			sleep 0.02
		done
		[ -n "$lost" ] || lost=$(nowms)
		echo $((lost - t0)) >>"$tmp/hostcrash.detect"
		sed -n 's/.*recovered: every rank [a-z ]*(\([0-9]*\) ms after the failure).*/\1/p' "$tmp/err" | head -1 >>"$tmp/hostcrash.restart"
		kill -INT "$job" 2>/dev/null || true
		wait "$job" 2>/dev/null || true
		$ftc revive node008 >/dev/null
		t=$((t + 1))
	done
	echo "--restart job, MPICH (mpi_ckpt), 16 ranks on 8 emulated hosts + 1 spare (kary:2), the leaf host node008 crashed, $TRIALS trials:"
	echo "  crash to declared lost (detection): median $(median "$tmp/hostcrash.detect") ms, p95 $(pctl "$tmp/hostcrash.detect" 95) ms"
	echo "  declared lost to every rank started again on the spare: median $(median "$tmp/hostcrash.restart") ms, p95 $(pctl "$tmp/hostcrash.restart" 95) ms (target < 750)"
elif want hostcrash; then
	echo "--restart job, a crashed host: skipped (needs root, mpicc.mpich and chaos/.bin/ftcluster: make ftcluster-bin)"
fi
