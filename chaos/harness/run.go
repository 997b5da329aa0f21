package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/trial"
	"github.com/ftlaunch/ftlaunch/launch"
	"github.com/ftlaunch/ftlaunch/launch/fence"
	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// PlantEnv plants a violation in every trial, to show that the checks
// can fail (tests only): "leftover" leaves a process of the job behind,
// "duplicate" writes an output line twice.
const PlantEnv = "FTLAUNCH_CHAOS_PLANT"

// delayStartEnv is launch's test-only hold on a test node's start
// (FTLAUNCH_TEST_DELAY_START=node3=/path: until the file exists). Chaos
// holds one leaf with it so that launch-phase faults fall during a launch.
const delayStartEnv = "FTLAUNCH_TEST_DELAY_START"

// raftCutEnv is the state log's test hook for raftcut: while the file it
// names exists, the front-end's replica drops its raft traffic
// (journal.RaftStream.CutWhile), its tree links left alone.
const raftCutEnv = journal.RaftCutEnv

// Timing of a trial.
const (
	chaosPoll              = 20 * time.Millisecond   // how often the runner looks at /proc and the job
	chaosGroupWait         = 20 * time.Second        // how long a root or replica fault waits for the raft group
	chaosCleanup           = 20 * time.Second        // bound for the job's processes to go once it is over
	chaosCleanupReplicated = 40 * time.Second        // the same with root replicas: orphans wait 30 s for adoption
	chaosStopBound         = 30 * time.Second        // a stop never detected is continued after this
	chaosSlowFor           = 1500 * time.Millisecond // a slow agent is throttled this long
	chaosSlowPeriod        = 100 * time.Millisecond  // stopped, then running, this long each
)

// trialResult is what a trial did and found.
type trialResult struct {
	trial   trial.Trial
	hold    string // the held node's name (launch phase)
	dir     string
	start   time.Time
	applied []trial.Applied
	// detect[k] is applied[k]'s fault to its failure in the state log;
	// resumed[k] a stop's SIGSTOP to its SIGCONT (-1: not measured).
	detect, resumed []time.Duration
	takeover        time.Duration // root kill to the successor's takeover (-1: none)
	jobTime         time.Duration // start to the job's end
	cleanup         time.Duration // the job's end to its last process gone (-1: some left)
	atEnd           int           // the job's processes still up when it was over
	outcome         trial.Outcome
	expect          trial.Expectation
	violations      []trial.Violation
	notes           []string // what the report should say beside pass or fail
	// stale[k] is what applied[k]'s agent incarnation left, for a stop or
	// a partition (nil otherwise).
	stale []*staleReport
}

// staleReport is what a stopped or cut-off agent incarnation left: its
// processes up at the job's end, and how long they took to go once it
// ran again.
type staleReport struct {
	atEnd, atBack int
	gone          time.Duration // -1: not measured, or not gone within the bound
	back          bool
}

func (r *trialResult) pass() bool { return len(r.violations) == 0 }

// ending is the job's end as observed.
func (r *trialResult) ending() string {
	o := r.outcome
	switch o.State {
	case "finished":
		if o.ExitCode == 0 {
			return "completed"
		}
		return fmt.Sprintf("failed (exit %d)", o.ExitCode)
	case "":
		return "no state"
	}
	return o.State
}

// actionRun is the runner's state of one action.
type actionRun struct {
	trial.Applied
	done bool
	// stop, partition: when detected, when to continue (heal), continued;
	// stall: when the front-end was continued; raftcut: when the cut healed.
	detectAt, contAt time.Time
	continued        bool
	// stop, partition: the agent incarnation hit and the ranks it ran;
	// what of them was up at the job's end; once it ran again, when the
	// last went (or what was left past trial.StaleBound).
	stale       []procID
	staleAtEnd  []string
	staleAtBack int
	backGone    time.Duration
	staleLeft   []string
	staleDone   bool
	// slow: throttled until, next toggle, stopped now.
	slowUntil, toggle time.Time
	slowStopped       bool
}

// trialRun is one trial in progress; runTrial owns it.
type trialRun struct {
	o        *Options
	topo     trial.Topology
	hosts    *chaosHosts // the emulated cluster; nil on test nodes
	hf       hostFaults  // what the trial did to the hosts
	tr       trial.Trial
	res      *trialResult
	work     string
	stateDir string
	gate     string
	raftCut  string // while this file exists, the front-end's raft traffic is cut (raftcut)
	errPath  string
	outPath  string
	scanner  procScanner
	cmd      *exec.Cmd
	acts     []*actionRun

	rankProc map[int]jobProc
	nodeUp   map[int]time.Time
	runStart time.Time
	tableAt  time.Time     // when the first node table was seen published
	errText  []byte        // the front-end's stderr so far (read every poll)
	live     *journal.Live // the job's live report, last read
	// recSeen is the last poll that saw a recovery under way in the live
	// report, recStage its stage then.
	recSeen  time.Time
	recStage string
	gateOpen bool
	failover bool // the front-end was killed after the group formed: the job goes on
	jobDir   string
	stray    []string // more than one job in the trial's state directory (a harness bug)
}

// runTrial runs one trial to its end and judges it. Problems of the
// harness itself (a job that cannot start) are violations too.
func runTrial(ctx context.Context, o *Options, self string, topo trial.Topology, hosts *chaosHosts, tr trial.Trial, stderr io.Writer) *trialResult {
	r := &trialResult{trial: tr, takeover: -1, cleanup: -1, jobTime: -1}
	if tr.Hold >= 0 {
		r.hold = topo.Name(tr.Hold)
	}
	r.dir = filepath.Join(o.Out, fmt.Sprintf("trial-%03d", tr.Index+1))
	t := &trialRun{
		o: o, topo: topo, hosts: hosts, tr: tr, res: r,
		work: filepath.Join(r.dir, "work"), stateDir: filepath.Join(r.dir, "state"), gate: filepath.Join(r.dir, "launch-gate"),
		raftCut: filepath.Join(r.dir, "raft-cut"),
		errPath: filepath.Join(r.dir, "frontend.stderr"), outPath: filepath.Join(r.dir, "frontend.stdout"),
		rankProc: map[int]jobProc{}, nodeUp: map[int]time.Time{}, gateOpen: tr.Hold < 0,
	}
	for _, a := range tr.Actions {
		t.acts = append(t.acts, &actionRun{Applied: trial.Applied{Action: a}})
	}
	harness := func(err error) *trialResult {
		r.violations = append(r.violations, trial.Violation{Invariant: "harness", Detail: err.Error()})
		r.applied = t.applied()
		return r
	}
	if err := os.MkdirAll(t.work, 0o755); err != nil {
		return harness(fmt.Errorf("trial directory: %w", err))
	}
	work, err := filepath.EvalSymlinks(t.work)
	if err != nil {
		return harness(fmt.Errorf("trial directory: %w", err))
	}
	marker := fmt.Sprintf("%d-%d-%d", os.Getpid(), tr.Index, tr.Seed)
	t.scanner = procScanner{workDir: work, marker: marker, self: os.Getpid()}
	if err := t.start(self, marker); err != nil {
		t.openGate() // a host held for the launch runs again
		return harness(err)
	}
	exited := make(chan struct{})
	go func() { t.cmd.Wait(); close(exited) }() // waited for below before runTrial returns
	over, interrupted := t.drive(ctx, exited)
	if interrupted {
		r.violations = append(r.violations, trial.Violation{Invariant: "harness", Detail: "interrupted"})
	}
	select {
	case <-exited:
	default:
		t.cmd.Process.Kill()
		<-exited
	}
	if err := t.finish(over, interrupted); err != nil {
		r.violations = append(r.violations, trial.Violation{Invariant: "harness", Detail: err.Error()})
	}
	r.applied = t.applied()
	t.judge()
	if r.pass() && !o.Keep {
		if err := os.RemoveAll(r.dir); err != nil {
			fmt.Fprintf(stderr, "ftlaunch chaos: remove %s: %v\n", r.dir, err)
		}
	}
	return r
}

func (t *trialRun) applied() []trial.Applied {
	out := make([]trial.Applied, len(t.acts))
	for i, a := range t.acts {
		out[i] = a.Applied
	}
	return out
}

// start starts the front-end: the job on test nodes, in the trial's own
// directory, with the trial's marker in its environment.
func (t *trialRun) start(self, marker string) error {
	o := t.o
	app := appCommand(o, self, t.work)
	// -l: the checks read rank labels ("[0] chaos app: verified"), which
	// no job gets by default (test nodes no longer either: every
	// completed --restart none trial failed app-result without it).
	args := []string{"run", "--verbose", "--state-dir", t.stateDir, "-l", "--test-nodes", strconv.Itoa(o.Nodes + o.SpareNodes)}
	if t.hosts != nil {
		// Over SSH to the emulated hosts, from this machine.
		args = []string{"run", "--verbose", "--state-dir", t.stateDir, "-l", "--hostfile", t.hosts.hostfile, "--ssh-config", t.hosts.c.SSHConfig()}
	}
	if o.SpareNodes > 0 {
		// The last K test nodes or hosts of the hostfile.
		args = append(args, "--spare-nodes", strconv.Itoa(o.SpareNodes))
	}
	args = append(args, "--tree", o.Tree, "--replicas", strconv.Itoa(o.Replicas), "--restart", o.Restart, "--kill-after", "1s",
		"--timeout", (o.TrialLimit / 2).String(), "-n", strconv.Itoa(o.Nodes*o.PPN))
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, delayStartEnv+"=") && !strings.HasPrefix(kv, chaosMarkerEnv+"=") && !strings.HasPrefix(kv, raftCutEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, chaosMarkerEnv+"="+marker)
	if slices.ContainsFunc(t.tr.Actions, func(a trial.Action) bool { return a.Fault == trial.RaftCut }) {
		env = append(env, raftCutEnv+"="+t.raftCut)
	}
	// The ranks' own start and end times, for the overlap check (judge.go).
	if err := os.MkdirAll(t.ranksDir(), 0o755); err != nil {
		return fmt.Errorf("rank times: %w", err)
	}
	env = append(env, fence.EnvRankTimes+"="+t.ranksDir())
	switch {
	case t.tr.Hold < 0:
	case t.hosts != nil:
		if err := t.hosts.holdHost(t.topo.Name(t.tr.Hold), syscall.SIGSTOP); err != nil {
			return err
		}
	default:
		env = append(env, delayStartEnv+"="+trial.NodeName(t.tr.Hold)+"="+t.gate)
	}
	outF, err := os.Create(t.outPath)
	if err != nil {
		return fmt.Errorf("front-end's stdout: %w", err)
	}
	defer outF.Close()
	errF, err := os.Create(t.errPath)
	if err != nil {
		return fmt.Errorf("front-end's stderr: %w", err)
	}
	defer errF.Close()
	cmd := exec.Command(self, append(args, app...)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = t.work, env, outF, errF
	// Its own process group: the chaos run's Ctrl-C is ours to handle.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the job: %w", err)
	}
	t.cmd, t.res.start = cmd, time.Now()
	return nil
}

// drive applies the trial's faults as their times come and returns when
// the job is over and every fault has run its course (or the trial's time
// is up: the job is then reported as not ended). It returns when the job
// was over.
func (t *trialRun) drive(ctx context.Context, exited <-chan struct{}) (over time.Time, interrupted bool) {
	tick := time.NewTicker(chaosPoll)
	defer tick.Stop()
	deadline := t.res.start.Add(t.o.TrialLimit)
	feExited := false
	var lastStatus time.Time
	jobOver := false
	for {
		select {
		case <-ctx.Done():
			return time.Now(), true
		case <-exited:
			feExited, exited = true, nil
		case <-tick.C:
		}
		now := time.Now()
		t.observe(now)
		if !jobOver {
			switch {
			case !t.failover:
				jobOver = feExited
			case now.Sub(lastStatus) >= 250*time.Millisecond:
				// The successor root runs the job: over once the log
				// has its final status (or its roots were lost).
				lastStatus = now
				if st, err := jobstate.ReadStatus(t.stateDir, ""); err == nil && st.State != "running" {
					jobOver = true
				}
			}
			if jobOver {
				over = now
				// What of a stopped or cut-off incarnation outlived the
				// job's end (a node that answers is fenced before it).
				for _, a := range t.acts {
					a.staleAtEnd = alive(a.stale)
				}
			}
		}
		t.act(now, jobOver)
		if jobOver && t.settled() {
			return over, false
		}
		if now.After(deadline) {
			return now, false
		}
	}
}

// observe notes the job's ranks, which nodes are up, the front-end's
// stderr and the live report.
func (t *trialRun) observe(now time.Time) {
	if b, err := os.ReadFile(t.errPath); err == nil {
		t.errText = b
	}
	for _, p := range t.scanner.scan(false) {
		if p.rank < 0 {
			continue
		}
		if _, ok := t.rankProc[p.rank]; !ok {
			t.rankProc[p.rank] = p
		}
	}
	for i := range t.topo.Nodes() {
		if _, ok := t.nodeUp[i]; ok {
			continue
		}
		up := true
		for _, r := range t.topo.RanksOf(i) {
			_, seen := t.rankProc[r]
			up = up && seen
		}
		if up {
			t.nodeUp[i] = now
		}
	}
	if t.tableAt.IsZero() && t.tablePublished() {
		t.tableAt = now
	}
	if t.runStart.IsZero() && len(t.rankProc) == len(t.topo.RankNode) && t.computing() {
		t.runStart = now
	}
	if t.jobDir == "" {
		jobs, _ := filepath.Glob(filepath.Join(t.stateDir, "ft-*"))
		switch len(jobs) {
		case 0:
		case 1:
			t.jobDir = jobs[0]
		default:
			t.stray = jobs // the trial's state directory is its own: never
		}
	}
	if t.jobDir != "" {
		// The root rewrites it at every step of its failure planner (a
		// recovery begun, each of its phases) and once a second.
		if l, err := launch.ReadLive(t.jobDir); err == nil {
			t.live = l
			if l.Recovery != nil {
				t.recSeen, t.recStage = now, l.Recovery.Stage
			}
		}
	}
	for _, a := range t.acts {
		t.stepStale(a, now)
	}
}

// tablePublished says whether the job's ranks may be replaced: under a
// restart policy, once the front-end published the first node table (its
// --verbose line); a rank lost before that ends a --restart rank job.
func (t *trialRun) tablePublished() bool {
	if t.o.Policy == trial.NoRestart {
		return true
	}
	return bytes.Contains(t.errText, []byte("node table of "+strconv.Itoa(len(t.topo.RankNode))+" ranks published"))
}

// ranksEnded says whether every rank of the job ended: each was seen
// running, none runs now, and no recovery is under way (which may be
// starting them again).
func (t *trialRun) ranksEnded() bool {
	if len(t.rankProc) < len(t.topo.RankNode) || t.live != nil && t.live.Recovery != nil {
		return false
	}
	for _, p := range t.scanner.scan(false) {
		if p.rank >= 0 {
			return false
		}
	}
	return true
}

// computing says whether the ranks, all up, compute: what starts the run
// phase. The client library's ranks once the first node table is out
// (tablePublished); MPI's once every rank wrote its first checkpoint
// (MPI_Init, which takes seconds for MPICH on a loaded machine, is over);
// a plain program's at once.
func (t *trialRun) computing() bool {
	switch {
	case t.o.App != "":
		return !t.tableAt.IsZero()
	case t.o.AppKind == KindShell:
		return true
	case t.o.AppKind == KindMPI:
		for r := range t.topo.RankNode {
			if _, err := os.Stat(filepath.Join(t.work, "ckpt", "rank-"+strconv.Itoa(r))); err != nil {
				return false
			}
		}
		return true
	}
	return !t.tableAt.IsZero()
}

// phaseStart is when action k's clock starts, or zero while it cannot.
func (t *trialRun) phaseStart(k int, now time.Time) time.Time {
	a := t.acts[k].Action
	if a.InRecovery && k > 0 {
		// Once a recovery is seen under way after the previous action.
		prev := t.acts[k-1]
		if !prev.done || prev.Skipped != "" || t.recSeen.Before(prev.Time) {
			return time.Time{}
		}
		return t.recSeen
	}
	if a.AfterPrevious && k > 0 {
		prev := t.acts[k-1]
		switch {
		case !prev.done:
			return time.Time{}
		case prev.Skipped != "":
			return now
		}
		return prev.Time
	}
	if t.tr.Phase == trial.Run || t.tr.Phase == trial.Recovering {
		return t.runStart
	}
	if a.Target.Node >= 0 {
		return t.nodeUp[a.Target.Node]
	}
	// The front-end in a launch: once every node but the held one is up.
	var last time.Time
	for i := range t.topo.Nodes() {
		if i == t.tr.Hold {
			continue
		}
		up, ok := t.nodeUp[i]
		if !ok {
			return time.Time{}
		}
		if up.After(last) {
			last = up
		}
	}
	return last
}

// groupFormed says whether every replica agent joined the raft group.
func (t *trialRun) groupFormed() bool {
	b, err := os.ReadFile(t.errPath)
	return err == nil && bytes.Count(b, []byte("joined the group")) >= t.o.Replicas-1
}

// act applies the actions whose time came, continues stopped agents,
// throttles slow ones, and opens the launch gate once the launch-phase
// faults are in.
func (t *trialRun) act(now time.Time, jobOver bool) {
	for k, a := range t.acts {
		if a.done {
			continue
		}
		if jobOver {
			a.done, a.Skipped = true, "the job ended first"
			continue
		}
		if why := t.missedRecovery(k); why != "" {
			a.done, a.Skipped = true, why
			continue
		}
		t0 := t.phaseStart(k, now)
		if t0.IsZero() || now.Before(t0.Add(a.At)) {
			continue
		}
		formed := t.o.Replicas > 1 && t.groupFormed()
		if t.o.Replicas > 1 && (a.Fault == trial.Root || a.Fault == trial.Replica || a.Fault == trial.Stall || a.Fault == trial.RaftCut) && !formed && now.Before(t0.Add(t.groupWait())) {
			continue
		}
		a.done = true
		pid, err := t.targetPID(a.Action)
		if err != nil {
			a.Skipped = err.Error()
			continue
		}
		if t.hostFault(a.Fault) {
			// The host's agent (pid) is named in the report; the fault
			// is the host's.
			if err := t.hosts.apply(context.Background(), &t.hf, a.Fault, a.Target.String()); err != nil {
				a.Skipped = err.Error()
				continue
			}
			a.Time, a.PID, a.GroupFormed, a.RanksEnded = now, pid, formed, t.ranksEnded()
			t.began(a, now)
			continue
		}
		a.RanksEnded = t.ranksEnded()
		if a.Fault == trial.RaftCut {
			// The front-end's replica drops its raft traffic while the
			// file exists; its tree links carry on.
			if err := os.WriteFile(t.raftCut, nil, 0o600); err != nil {
				a.Skipped = fmt.Sprintf("raft cut: %v", err)
				continue
			}
			a.Time, a.PID, a.GroupFormed = now, pid, formed
			t.began(a, now)
			continue
		}
		sig := syscall.SIGKILL
		if a.Fault == trial.Stop || a.Fault == trial.Slow || a.Fault == trial.Stall {
			sig = syscall.SIGSTOP
		}
		if err := syscall.Kill(pid, sig); err != nil {
			a.Skipped = fmt.Sprintf("signal %d: %v", pid, err)
			continue
		}
		a.Time, a.PID, a.GroupFormed = now, pid, formed
		t.began(a, now)
	}
	if !t.gateOpen {
		all := true
		for _, a := range t.acts {
			all = all && a.done
		}
		if all || jobOver {
			t.openGate()
		}
	}
	for _, a := range t.acts {
		if a.Time.IsZero() || a.Skipped != "" {
			continue
		}
		switch {
		case t.comesBack(a.Fault):
			t.stepSilent(a, now, jobOver)
		case a.Fault == trial.Slow:
			t.stepSlow(a, now, jobOver)
		case a.Fault == trial.Stall && !a.continued && !now.Before(a.Time.Add(trial.StallFor)):
			// The front-end's pause is over.
			syscall.Kill(a.PID, syscall.SIGCONT)
			a.continued, a.contAt = true, now
		case a.Fault == trial.RaftCut && !a.continued && !now.Before(a.Time.Add(trial.RaftCutFor)):
			// The cut heals.
			os.Remove(t.raftCut)
			a.continued, a.contAt = true, now
		}
	}
}

// began notes what an action just applied needs followed: the
// successor of a killed front-end, a slow agent's duty cycle, a stopped
// or cut-off agent's incarnation (its agent and ranks), and the recovery
// stage an action timed into a recovery fell in.
func (t *trialRun) began(a *actionRun, now time.Time) {
	if a.InRecovery {
		a.During = t.recStage
	}
	switch a.Fault {
	case trial.Root:
		t.failover = t.o.Replicas > 1 && a.GroupFormed
	case trial.Slow:
		if t.hosts != nil {
			a.slowUntil = now.Add(chaosSlowFor)
			return
		}
		a.slowUntil, a.toggle, a.slowStopped = now.Add(chaosSlowFor), now.Add(chaosSlowPeriod), true
	case trial.Stop, trial.Partition:
		if t.comesBack(a.Fault) {
			a.stale = t.incarnation(a.PID)
			a.backGone = -1
		}
	}
}

// comesBack says whether an agent hit by fault f runs again within the
// trial, 3x the fault's detection time after it: a stopped agent
// (SIGCONT), and under a restart policy a cut-off host (healed: issue
// #14's partition). With no restart a cut-off host stays cut off until
// the trial is over: it must clean up by itself.
func (t *trialRun) comesBack(f trial.Fault) bool {
	return f == trial.Stop || f == trial.Partition && t.hostFault(f) && t.o.Policy != trial.NoRestart
}

// missedRecovery says why an action timed into a recovery cannot fall
// ("": it still may): the recovery its trigger started was over before
// the live report showed it (it is polled every chaosPoll).
func (t *trialRun) missedRecovery(k int) string {
	a := t.acts[k]
	if !a.InRecovery || k == 0 {
		return ""
	}
	prev := t.acts[k-1]
	if !prev.done || prev.Skipped != "" || !t.recSeen.Before(prev.Time) || t.live == nil {
		return ""
	}
	if t.live.Recovery == nil && t.live.Recoveries > 0 {
		return fmt.Sprintf("the recovery after %s was over before the live report showed it (polled every %v)", prev.Action, chaosPoll)
	}
	return ""
}

// groupWait is how long a root or replica fault waits for the raft
// group. A host held at its sshd (emulated cluster) is held only within
// its client's connect timeout, and the group may need that host: then
// the fault falls after chaosHoldWait, with the group not formed (seed
// 3327657452984364878 of --replicas 3 --seed 2001 waited 20 s for a group
// that needed the held node002, whose launch then timed out).
func (t *trialRun) groupWait() time.Duration {
	if t.hosts != nil && !t.gateOpen {
		return chaosHoldWait
	}
	return chaosGroupWait
}

// stepSilent continues a stopped agent, or heals a cut-off host, 3x the
// detection time after the fault (detected: the root reported the node's
// agent lost, or another failure ending the job, or the job ended).
func (t *trialRun) stepSilent(a *actionRun, now time.Time, jobOver bool) {
	if a.continued {
		return
	}
	if a.detectAt.IsZero() {
		detected := jobOver || t.live != nil && t.live.Failure != "" || t.reportedLost(a.Target.String())
		switch {
		case detected:
			a.detectAt = now
			a.contAt = a.Time.Add(3 * now.Sub(a.Time))
		case now.Sub(a.Time) > chaosStopBound:
			a.detectAt, a.contAt = now, now
		}
	}
	if a.contAt.IsZero() || now.Before(a.contAt) {
		return
	}
	if a.Fault == trial.Partition {
		if err := t.hosts.healHost(&t.hf, a.Target.String()); err != nil {
			t.res.notes = append(t.res.notes, err.Error())
		}
	} else if len(a.stale) == 0 || len(alive(a.stale[:1])) > 0 {
		// Only the agent stopped, not a process that took its pid after
		// a fence killed it.
		syscall.Kill(a.PID, syscall.SIGCONT)
	}
	a.continued = true
	a.staleAtBack = len(alive(a.stale))
	t.res.resumedSet(t.index(a), now.Sub(a.Time))
}

// reportedLost says whether the front-end reported node's agent lost (the
// failure planner's report on its stderr, under every policy).
func (t *trialRun) reportedLost(node string) bool {
	return trial.Names(string(t.errText), []string{"lost the agent of node " + node})
}

// incarnation lists the agent process pid and the ranks it runs now: what
// a fence of its incarnation must kill.
func (t *trialRun) incarnation(pid int) []procID {
	var out []procID
	if id, ok := procIDOf(pid); ok {
		out = append(out, id)
	}
	for _, p := range t.scanner.scan(false) {
		if p.ppid == pid && p.rank >= 0 {
			if id, ok := procIDOf(p.pid); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// stepStale follows a stopped or cut-off agent's incarnation once it ran
// again: when its last process went, or which were left after
// trial.StaleBound.
func (t *trialRun) stepStale(a *actionRun, now time.Time) {
	if !a.continued || a.staleDone || a.stale == nil {
		return
	}
	left := alive(a.stale)
	switch {
	case len(left) == 0:
		a.backGone, a.staleDone = now.Sub(a.contAt), true
	case now.Sub(a.contAt) > trial.StaleBound:
		a.staleLeft, a.staleDone = left, true
	}
}

// hostFault says whether fault f is applied to a host, not by a signal:
// a crash, a partition, and on the emulated cluster a slow link.
func (t *trialRun) hostFault(f trial.Fault) bool {
	return t.hosts != nil && (f == trial.Node || f == trial.Partition || f == trial.Slow)
}

// stepSlow stops and continues a slow agent in turn until its time is up
// (on the emulated cluster: ends its host's slow link then).
func (t *trialRun) stepSlow(a *actionRun, now time.Time, jobOver bool) {
	if a.slowUntil.IsZero() {
		return
	}
	if t.hosts != nil {
		if jobOver || !now.Before(a.slowUntil) {
			if err := t.hf.unslow(a.Target.String()); err != nil {
				t.res.notes = append(t.res.notes, err.Error())
			}
			a.slowUntil = time.Time{}
		}
		return
	}
	if jobOver || !now.Before(a.slowUntil) {
		syscall.Kill(a.PID, syscall.SIGCONT)
		a.slowUntil, a.slowStopped = time.Time{}, false
		return
	}
	if now.Before(a.toggle) {
		return
	}
	sig := syscall.SIGSTOP
	if a.slowStopped {
		sig = syscall.SIGCONT
	}
	syscall.Kill(a.PID, sig)
	a.slowStopped, a.toggle = !a.slowStopped, now.Add(chaosSlowPeriod)
}

func (t *trialRun) index(a *actionRun) int { return slices.Index(t.acts, a) }

func (r *trialResult) resumedSet(k int, d time.Duration) {
	for len(r.resumed) <= k {
		r.resumed = append(r.resumed, -1)
	}
	r.resumed[k] = d
}

// settled: every action applied or skipped, stops continued and cut-off
// hosts healed (and their incarnation followed to its end), slows over.
func (t *trialRun) settled() bool {
	for _, a := range t.acts {
		if !a.done || a.Skipped == "" && !a.Time.IsZero() &&
			(t.comesBack(a.Fault) && (!a.continued || a.stale != nil && !a.staleDone) || a.Fault == trial.Slow && !a.slowUntil.IsZero() ||
				(a.Fault == trial.Stall || a.Fault == trial.RaftCut) && !a.continued) {
			return false
		}
	}
	return true
}

func (t *trialRun) openGate() {
	if t.gateOpen {
		return
	}
	t.gateOpen = true
	if t.hosts != nil {
		if err := t.hosts.holdHost(t.topo.Name(t.tr.Hold), syscall.SIGCONT); err != nil {
			t.res.notes = append(t.res.notes, err.Error())
		}
		return
	}
	if f, err := os.Create(t.gate); err == nil {
		f.Close()
	}
}

// targetPID finds the process an action hits: a rank, its node's agent
// (its ranks' parent), or the front-end.
func (t *trialRun) targetPID(a trial.Action) (int, error) {
	if a.Fault == trial.Root || a.Fault == trial.Stall || a.Fault == trial.RaftCut {
		return t.cmd.Process.Pid, nil
	}
	live := map[int]jobProc{}
	for _, p := range t.scanner.scan(false) {
		live[p.pid] = p
	}
	if a.Fault == trial.Rank {
		p, ok := t.rankProc[a.Target.Rank]
		if _, alive := live[p.pid]; !ok || !alive {
			return 0, fmt.Errorf("rank %d was already gone", a.Target.Rank)
		}
		return p.pid, nil
	}
	for _, r := range t.topo.RanksOf(a.Target.Node) {
		p, ok := t.rankProc[r]
		if !ok {
			continue
		}
		agent, alive := live[p.ppid]
		if !alive && t.hosts != nil {
			// An emulated host's agent runs elsewhere than the job's
			// directory: read its parent directly.
			agent, alive = procAt(p.ppid)
		}
		if alive && strings.Contains(agent.cmdline, " agent") {
			return agent.pid, nil
		}
	}
	return 0, fmt.Errorf("the agent of %s was already gone", a.Target.String())
}
