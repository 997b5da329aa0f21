package harness

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/trial"
	"github.com/ftlaunch/ftlaunch/launch/fence"
	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/hashicorp/raft"
)

// The end of a trial: waiting for the job's processes to be gone on every
// node, then judging the outcome against the trial's promise (the
// invariants) and reading what the state log and the output say.

// finish makes sure nothing of the trial stays stopped or held, then waits
// (bounded) for the job's processes to go; those left are named, then
// killed, so that the next trial starts clean. On the emulated cluster
// the wait covers every host, a partitioned one still cut off (a host cut
// off must clean up by itself); then partitions are healed and crashed
// hosts booted again. The error is the hosts' that could not be restored.
func (t *trialRun) finish(over time.Time, interrupted bool) error {
	for _, a := range t.acts {
		if a.PID > 0 && !t.hostFault(a.Fault) && (a.Fault == trial.Stop || a.Fault == trial.Slow || a.Fault == trial.Stall) && !a.continued {
			syscall.Kill(a.PID, syscall.SIGCONT)
		}
	}
	t.openGate()
	r := t.res
	r.jobTime = over.Sub(r.start)
	r.atEnd = len(t.jobProcs())
	var planted *exec.Cmd
	if os.Getenv(PlantEnv) == "leftover" {
		// A process of the job that outlives it, as a broken agent would
		// leave: in the job's directory, in a session of its own.
		planted = exec.Command("sleep", "300")
		planted.Dir = t.work
		planted.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := planted.Start(); err != nil {
			planted = nil
		}
	}
	// The cleanup is timed from the job's end, or from the last SIGCONT
	// when a stopped agent was continued later (it could not act before).
	from := over
	for _, a := range t.acts {
		if d := a.contAt; a.continued && d.After(from) {
			from = d
		}
	}
	bound := time.Now().Add(chaosCleanup)
	if t.o.Replicas > 1 {
		// An agent of a replicated job that lost its parent asks the
		// replicas to adopt it for 30 s (launch/failover.go's adoptWait)
		// before it kills its ranks: a stopped one does once continued.
		bound = time.Now().Add(chaosCleanupReplicated)
	}
	if interrupted {
		bound = time.Now() // the user is waiting: kill what is left now
	}
	var left []jobProc
	for {
		left = t.jobProcs()
		if len(left) == 0 {
			r.cleanup = time.Since(from)
			break
		}
		if time.Now().After(bound) {
			break
		}
		time.Sleep(chaosPoll) // polling /proc for processes to end
	}
	var err error
	if t.hosts != nil {
		err = t.hosts.heal(&t.hf)
		// sshd's connections are sshd's, not the job's (chaosHosts.procs):
		// given a moment to close, then killed so that they do not pile
		// up over the trials. Those left had lost their client with a
		// crashed or cut-off host, or were held (a held host's sshd takes
		// connections up only once continued).
		var sessions []jobProc
		for until := time.Now().Add(chaosSessionWait); ; {
			if _, sessions = t.hosts.procs(); len(sessions) == 0 || time.Now().After(until) {
				break
			}
			time.Sleep(chaosPoll) // polling the hosts' processes
		}
		if len(sessions) > 0 {
			var names []string
			for _, p := range sessions {
				names = append(names, p.String())
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
			r.notes = append(r.notes, fmt.Sprintf("%d sshd connection(s) still open %v after the job's processes were gone (killed): %s",
				len(sessions), chaosSessionWait, strings.Join(names, "; ")))
		}
	}
	for _, p := range left {
		r.outcome.Left = append(r.outcome.Left, p.String())
		syscall.Kill(p.pid, syscall.SIGCONT)
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
	if planted != nil {
		planted.Process.Kill()
		planted.Wait()
	}
	if t.hosts != nil {
		err = errors.Join(err, t.hosts.revive(&t.hf, t.hf.cut))
	}
	return err
}

// jobProcs lists the trial's live processes: those found by its
// directory and marker, and on the emulated cluster every host's.
func (t *trialRun) jobProcs() []jobProc {
	ps := t.scanner.scan(true)
	if t.hosts == nil {
		return ps
	}
	job, _ := t.hosts.procs()
	for _, hp := range job {
		if i := slices.IndexFunc(ps, func(p jobProc) bool { return p.pid == hp.pid }); i >= 0 {
			ps[i].host = hp.host
			continue
		}
		ps = append(ps, hp)
	}
	return ps
}

// judge reads the job's state log and output and checks the invariants.
func (t *trialRun) judge() {
	r, o := t.res, &t.res.outcome
	r.detect = make([]time.Duration, len(r.applied))
	for len(r.resumed) < len(r.applied) {
		r.resumed = append(r.resumed, -1)
	}
	for k := range r.detect {
		r.detect[k] = -1
	}
	if len(t.stray) > 0 {
		r.violations = append(r.violations, trial.Violation{Invariant: "harness",
			Detail: fmt.Sprintf("the trial's state directory holds %d jobs: %v", len(t.stray), t.stray)})
	}
	res, err := jobstate.Load(t.stateDir, "")
	var running *jobstate.ErrRunning
	switch {
	case t.lostBeforeLog(err):
		// With one replica the log starts once the launch is over (or
		// 100 ms into one that lasts): a front-end lost before its
		// replica initialized its file leaves no log, or a file without
		// its buckets, that `ftlaunch status` cannot read. No final
		// status was recorded: unfinished, a known limit (--strict: a
		// failure).
		const limit = "the front-end was lost before its replica initialized the state log: ftlaunch status cannot read the job"
		if t.o.Strict {
			o.StateProblems = append(o.StateProblems, "read the state log: "+errString(err)+" ("+limit+")")
			break
		}
		o.State = "unfinished"
		r.notes = append(r.notes, "known limit: "+limit+" ("+errString(err)+")")
	case errors.As(err, &running):
		o.State = "running"
	case err != nil:
		o.StateProblems = append(o.StateProblems, "read the state log: "+err.Error())
	default:
		rep := journal.Analyze(res.Best.State)
		o.State = "unfinished"
		if rep.Status.Done {
			o.State, o.ExitCode, o.Message = "finished", rep.Status.ExitCode, rep.Status.Message
		}
		for _, ev := range rep.Events {
			o.Versions = append(o.Versions, [2]uint64{ev.Epoch, ev.Version})
			switch ev.Kind {
			case "failure":
				o.Failures = append(o.Failures, trial.Event{Index: ev.Index, Time: ev.Time, Detail: ev.Detail})
			case "job-end":
				o.EndIndex = ev.Index
			case "leader":
				for _, a := range r.applied {
					if a.Fault == trial.Root && !a.Time.IsZero() && r.takeover < 0 {
						r.takeover = ev.Time.Sub(a.Time)
					}
				}
			}
		}
		t.detections(o.Failures)
		for _, rc := range rep.Recoveries {
			subject := fmt.Sprintf("rank %d", rc.Rank)
			if rc.Rank < 0 {
				if rc.Node == "" {
					continue // the job's own failure (a signal, the timeout)
				}
				subject = "node " + rc.Node
			}
			done := rc.Outcome == journal.OutcomeResumed || rc.Outcome == journal.OutcomeRestarted || rc.Outcome == journal.OutcomeRecovered
			o.Recoveries = append(o.Recoveries, trial.Recovery{Subject: subject, Outcome: rc.Outcome, Done: done, TotalMS: rc.TotalMS})
		}
		o.StateProblems = append(o.StateProblems, rep.Invariants...)
		o.StateProblems = append(o.StateProblems, res.Best.Problems...)
		// alone: the log was written by the front-end's replica as a
		// group of one (journal.Stats.Alone): the job ended before the
		// replica agents could join. A replica agent missing from the
		// group's last configuration never joined either (the job ended,
		// or the group lost its majority, before its turn came).
		servers := res.Best.Configuration.Servers
		alone := len(servers) == 1 && string(servers[0].ID) == res.Best.Meta.Node
		member := func(node string) bool {
			return slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == node })
		}
		var never []string
		for _, rf := range res.Replicas {
			rp := trial.ReplicaState{Node: filepath.Base(rf.Path)}
			if rf.Err != nil {
				rp.Err = rf.Err.Error()
			} else {
				d := rf.In.State.Digest()
				rp.Node, rp.Digest = rf.In.Meta.Node, hex.EncodeToString(d[:])
				// The documented end of a job shorter than its group's
				// formation (trial.ReplicaState.NeverJoined); --strict
				// compares such replicas too.
				if (alone || !member(rp.Node)) && rp.Node != res.Best.Meta.Node && rf.In.LastIndex == 0 && !t.o.Strict {
					rp.NeverJoined = true
					never = append(never, rp.Node)
				}
			}
			o.Replicas = append(o.Replicas, rp)
		}
		if len(never) > 0 {
			r.notes = append(r.notes, "known limit: the job ended before its raft group formed, so the replica(s) of "+
				strings.Join(never, ", ")+" never joined (not in the group's configuration) and hold an empty log (docs/state.md); not compared")
		}
	}
	o.Lines = t.outputLines()
	if os.Getenv(PlantEnv) == "duplicate" {
		if len(o.Lines) == 0 {
			o.Lines = []string{"[0] planted line"}
		}
		o.Lines = append(o.Lines, o.Lines[0])
	}
	o.AppOK, o.AppChecked, o.OutputUnique = appResult(t.o, len(t.topo.RankNode), o.Lines)
	over := r.start.Add(r.jobTime)
	t.staleOutcome(o.Failures, over)
	t.rankSpans()
	t.tabled(over)
	host, _ := os.Hostname()
	r.expect = trial.ExpectFor(t.o.AppKind.Program(), r.applied, t.topo, t.o.Replicas, t.o.Policy, t.tr.Phase, host)
	r.violations = append(r.violations, trial.Check(r.applied, r.expect, *o)...)
	if r.expect.NoMajority && o.State == "unfinished" && !r.expect.RootLost {
		const limit = "a replica's host was lost before every replica agent had joined the group, which then had no majority to record the final status (docs/guide.md)"
		if t.o.Strict {
			r.violations = append(r.violations, trial.Violation{Invariant: trial.InvStatus, Detail: "unfinished: " + limit + " (--strict)"})
		} else {
			r.notes = append(r.notes, "known limit: "+limit)
		}
	}
}

// lostBeforeLog says whether the front-end was killed before its replica
// initialized the log's file: the job's directory holds no raft.db, or
// only the front-end's, which bbolt created but the replica had not
// filled yet (read as truncated, or as a database without ftlaunch's
// bucket).
func (t *trialRun) lostBeforeLog(err error) bool {
	rootKilled := false
	for _, a := range t.acts {
		rootKilled = rootKilled || a.Fault == trial.Root && !a.Time.IsZero()
	}
	if !rootKilled || t.jobDir == "" || err == nil {
		return false
	}
	dbs, _ := filepath.Glob(filepath.Join(t.jobDir, "*", "raft.db"))
	host, _ := os.Hostname()
	return len(dbs) == 0 ||
		len(dbs) == 1 && filepath.Base(filepath.Dir(dbs[0])) == host &&
			(errors.Is(err, raftstore.ErrCorrupt) || errors.Is(err, raftstore.ErrForeign))
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// detections matches every applied fault with the first failure after it
// that names its target (else the first failure after it).
func (t *trialRun) detections(fails []trial.Event) {
	r := t.res
	for k, a := range r.applied {
		if a.Time.IsZero() || a.Fault == trial.Root || a.Fault == trial.Slow || a.Fault == trial.Stall {
			continue
		}
		name := []string{a.Target.String()}
		for _, f := range fails {
			if f.Time.Before(a.Time) {
				continue
			}
			if r.detect[k] < 0 {
				r.detect[k] = f.Time.Sub(a.Time)
			}
			if trial.Names(f.Detail, name) {
				r.detect[k] = f.Time.Sub(a.Time)
				break
			}
		}
	}
}

// declaredLost says whether the state log has a failure naming the node
// after the fault at.
func declaredLost(fails []trial.Event, node string, at time.Time) bool {
	for _, f := range fails {
		if !f.Time.Before(at) && trial.Names(f.Detail, []string{node}) {
			return true
		}
	}
	return false
}

// tabled marks the applied faults that were detected after the first node
// table was published (under a restart policy a lost agent is started
// again only then): every run-phase fault, and a launch-phase one whose
// detection (a silent node's takes seconds) came after the table.
func (t *trialRun) tabled(over time.Time) {
	r := t.res
	for k := range r.applied {
		a := &r.applied[k]
		if a.Time.IsZero() || t.tableAt.IsZero() {
			continue
		}
		seen := over
		if d := r.detect[k]; d >= 0 {
			seen = a.Time.Add(d)
		}
		a.Tabled = t.tr.Phase != trial.Launch || t.tableAt.Before(seen)
	}
}

// staleOutcome reports what every stopped or cut-off agent incarnation
// left: at the job's end, and once it ran again.
func (t *trialRun) staleOutcome(fails []trial.Event, over time.Time) {
	r := t.res
	r.stale = make([]*staleReport, len(t.acts))
	for k, a := range t.acts {
		if a.stale == nil {
			continue
		}
		name := a.Target.String()
		st := trial.Stale{Node: name, Fault: a.Fault, Lost: declaredLost(fails, name, a.Time), Answers: a.Fault == trial.Stop,
			AtEnd: a.staleAtEnd, Back: a.continued, Left: a.staleLeft}
		if st.Back && len(st.Left) > 0 && t.o.Replicas > 1 && !a.contAt.Before(over) {
			// An orphan of a replicated job asks the replicas to adopt it
			// for 30 s (launch/proto's AdoptWait); once the job is over
			// nobody is left to tell it that it was replaced.
			const limit = "came back after the job of its replicas ended: it asks them for adoption for 30 s before it kills its ranks"
			if t.o.Strict {
				st.Left = append(st.Left, "("+limit+")")
			} else {
				st.Limit = true
				r.notes = append(r.notes, fmt.Sprintf("known limit: %s %s", name, limit))
			}
		}
		r.outcome.Stale = append(r.outcome.Stale, st)
		r.stale[k] = &staleReport{atEnd: len(a.staleAtEnd), atBack: a.staleAtBack, gone: a.backGone, back: a.continued}
	}
}

// outputLines reads the job's output: the front-end's stdout (labeled by
// the front-end) and, after a failover, the successor's files (labeled
// here as attach does).
func (t *trialRun) outputLines() []string {
	var lines []string
	read := func(path, label string) {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 2<<20)
		for sc.Scan() {
			lines = append(lines, label+sc.Text())
		}
	}
	read(t.outPath, "")
	if t.jobDir != "" {
		outs, _ := filepath.Glob(filepath.Join(t.jobDir, "output", "rank.*.out"))
		for _, p := range outs {
			rank := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "rank."), ".out")
			read(p, "["+rank+"] ")
		}
	}
	return lines
}

// ranksDir is where the trial's agents and fences record their ranks'
// start and end times (launch/fence's rank times).
func (t *trialRun) ranksDir() string { return filepath.Join(t.res.dir, "ranks") }

// rankSpans reads the ranks' incarnations from the rank times, for the
// overlap check (trial.Overlap): an agent records each rank it starts and
// sees end, a fence each rank it killed. Nobody records the ranks of an
// agent the trial killed, or of a host it crashed: they died with it, at
// the fault's time.
func (t *trialRun) rankSpans() {
	times, err := fence.ReadRankTimes(t.ranksDir())
	if err != nil {
		t.res.notes = append(t.res.notes, "rank times: "+err.Error())
	}
	spans := trial.SpansOf(times)
	for _, a := range t.res.applied {
		switch a.Fault {
		case trial.Agent, trial.Leaf, trial.Interior, trial.Replica, trial.Node:
		default:
			continue
		}
		if a.Time.IsZero() || a.Skipped != "" {
			continue
		}
		for i := range spans {
			if sp := &spans[i]; sp.Node == a.Target.String() && sp.End.IsZero() && sp.Start.Before(a.Time) {
				sp.End = a.Time
			}
		}
	}
	t.res.outcome.Spans = spans
}
