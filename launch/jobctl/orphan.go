package jobctl

// A job none of whose roots answers: its front-end is gone and it had no
// replica agents, or every replica is gone too. Its state log is no
// longer held, and its end was never recorded (`unfinished`); its agents
// normally end their ranks once they lose their roots, but a stopped or
// cut-off agent cannot. Cancel then fences every node of the recorded
// node table as a root fences a lost agent's (launch/fence: `ftlaunch
// agent --fence JOB NODE INC`, started with the spawner the job's agents
// were started with), and records the job's end as the user's signal
// when its state log can be written (a log of one voter: the front-end's
// own, as every job without replicas keeps).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/launch/srunspawn"
	"github.com/ftlaunch/ftlaunch/launch/sshspawn"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Fenced is what a controller did to a job none of whose roots answers.
type Fenced struct {
	Job string `json:"job"`
	// StartedBy is how the job's agents were started, and so how its
	// nodes were reached: journal.StartProcess, StartSSH or StartSrun.
	StartedBy string      `json:"started_by"`
	Nodes     []NodeFence `json:"nodes"`
	// Recorded says the job's end was written to its state log as the
	// user's signal (ExitCode: 128 plus it); RecordErr why it could not be.
	Recorded  bool   `json:"recorded"`
	ExitCode  int    `json:"exit_code"`
	RecordErr string `json:"record_error,omitempty"`
}

// NodeFence is one node's fence: what it killed, or why it failed.
type NodeFence struct {
	Node   string `json:"node"`
	Killed string `json:"killed,omitempty"`
	Err    string `json:"error,omitempty"`
}

// Complete says every node was fenced: nothing of the job runs on.
func (f *Fenced) Complete() bool {
	return !slices.ContainsFunc(f.Nodes, func(n NodeFence) bool { return n.Err != "" })
}

// Fencing holds what a fence needs beyond the job's files.
type Fencing struct {
	// Self is the ftlaunch program the nodes run for a fence (default:
	// this process's executable, as the front-end starts agents).
	Self string
	// SSHConfig is the OpenSSH client configuration for a job whose
	// agents were started over SSH (default ~/.ssh/config).
	SSHConfig string
	// Fence, if set, replaces the fence of one node (tests).
	Fence func(ctx context.Context, job, node string) (string, error)
}

// noRoot reports whether err says that the job has no root left: it
// ended without a final status.
func noRoot(err error) (*jobstate.Status, bool) {
	var ended *ErrEnded
	if errors.As(err, &ended) && ended.Status.State == "unfinished" {
		return ended.Status, true
	}
	return nil, false
}

// endingSignal says whether s ends a job (kill's ending signals).
func endingSignal(s syscall.Signal) bool {
	switch s {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGKILL:
		return true
	}
	return false
}

// fenceJob fences every node of the job in jobDir, whose roots are all
// gone, and records its end as the user's signal sig when it can.
func fenceJob(ctx context.Context, jobDir string, sig syscall.Signal, from string, o Options) (*Fenced, error) {
	res, err := jobstate.Load("", jobDir)
	if err != nil {
		return nil, fmt.Errorf("job %s: read its node table: %w", filepath.Base(jobDir), err)
	}
	rep := journal.Analyze(res.Best.State)
	f := &Fenced{Job: cmp.Or(rep.Job.ID, filepath.Base(jobDir)), StartedBy: startedBy(rep), ExitCode: 128 + int(sig)}
	fence := o.Fencing.Fence
	if fence == nil {
		var closeSp func()
		fence, closeSp, err = o.Fencing.fencer(f.StartedBy)
		if err != nil {
			return nil, fmt.Errorf("job %s: reach its nodes: %w", f.Job, err)
		}
		defer closeSp()
	}
	nodes := jobNodes(rep)
	f.Nodes = make([]NodeFence, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Nodes[i].Node = node
			out, err := fence(ctx, f.Job, node)
			if err != nil {
				f.Nodes[i].Err = err.Error()
				return
			}
			f.Nodes[i].Killed = out
		}()
	}
	wg.Wait()
	msg := fmt.Sprintf("job %s by %s: no root answered; %s", endedWord(sig), from, f.summary())
	if err := recordEnd(ctx, res, f.ExitCode, msg); err != nil {
		f.RecordErr = err.Error()
	} else {
		f.Recorded = true
		// The dead root's last live report says nothing true any more.
		_ = os.Remove(filepath.Join(jobDir, journal.LiveFile))
	}
	return f, nil
}

// endedWord names what the user's signal did: cancelled (SIGTERM, as
// cancel sends), or ended with another.
func endedWord(sig syscall.Signal) string {
	if sig == syscall.SIGTERM {
		return "cancelled"
	}
	return "ended with " + unix.SignalName(sig)
}

// summary says in one line what the fences did, for the final status.
func (f *Fenced) summary() string {
	var parts []string
	for _, n := range f.Nodes {
		what := n.Killed
		if n.Err != "" {
			what = "not fenced: " + n.Err
		}
		parts = append(parts, n.Node+" "+what)
	}
	return "its nodes fenced (" + strings.Join(parts, "; ") + ")"
}

// jobNodes are the nodes a job's processes may run on: its plan's, its
// agents', and those of its node table, in that order, each once.
func jobNodes(rep *journal.Report) []string {
	var nodes []string
	add := func(n string) {
		if n != "" && n != rep.Plan.Root && n != journal.RootName && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	for _, n := range rep.Plan.Nodes {
		add(n.Name)
	}
	for _, a := range rep.Agents {
		add(a.Node)
	}
	for _, r := range rep.Ranks {
		add(r.Node)
	}
	return nodes
}

// startedBy reads from the job's launch events how its agents were
// started; a job none of whose agents recorded its start ran them as
// processes on this machine.
func startedBy(rep *journal.Report) string {
	for _, ev := range rep.Events {
		switch ev.Step {
		case journal.StepSSH:
			return journal.StartSSH
		case journal.StepStart:
			if how, _, _ := strings.Cut(ev.Detail, " "); how == journal.StartSrun || how == journal.StartProcess {
				return how
			}
		}
	}
	return journal.StartProcess
}

// fencer returns the fence of one node over the spawner of how (the
// way the job's agents were started), and what closes that spawner.
func (fc Fencing) fencer(how string) (func(ctx context.Context, job, node string) (string, error), func(), error) {
	self := fc.Self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, nil, fmt.Errorf("the ftlaunch program: %w", err)
		}
	}
	var sp spawn.Spawner
	closeSp := func() {}
	switch how {
	case journal.StartSSH:
		s, err := sshspawn.New(sshspawn.Options{ConfigFile: fc.SSHConfig, HostKeyPolicy: sshspawn.HostKeyFromConfig})
		if err != nil {
			return nil, nil, fmt.Errorf("ssh: %w", err)
		}
		sp, closeSp = launcher.SSHSpawner(s), func() { s.Close() }
	case journal.StartSrun:
		s, err := srunspawn.New(srunspawn.Options{})
		if err != nil {
			return nil, nil, fmt.Errorf("slurm: %w", err)
		}
		sp = s
	default:
		sp = launcher.LocalSpawner{}
	}
	l := launcher.NewLauncher(sp, []string{self}, 0, nil, 0, nil)
	return func(ctx context.Context, job, node string) (string, error) {
		// Every incarnation of the node's agent: the job is over.
		return l.Fence(ctx, job, node, math.MaxUint64)
	}, closeSp, nil
}

// recordEnd writes a job's end (exit code, message: the user's signal)
// to its state log, which nothing holds any more. Only a log of one voter
// can be: its voter's files are all of it, and a raft server opened on
// them leads alone. A log replicated over several root replicas, all
// gone, has no majority left to commit anything.
func recordEnd(ctx context.Context, res *jobstate.Loaded, code int, msg string) error {
	best := res.Best
	name := filepath.Base(best.Dir)
	var voters []string
	for _, s := range best.Configuration.Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		}
	}
	if len(voters) != 1 || voters[0] != name {
		return fmt.Errorf("its state log is replicated over %d root replicas (%s), none of which runs: no majority is left to record its end", len(voters), strings.Join(voters, ", "))
	}
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	r, err := raftstore.Open(raftstore.Config{StateDir: filepath.Dir(best.Dir), Name: name, Transport: trans})
	if err != nil {
		return fmt.Errorf("open its state log: %w", err)
	}
	defer r.Shutdown()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := lead(ctx, r); err != nil {
		return fmt.Errorf("open its state log: %w", err)
	}
	now := time.Now()
	end := &raftstore.Finish{Time: now, Status: raftstore.Status{ExitCode: code, Message: msg},
		// The job's own failure, about no rank and no node: the user's
		// signal (jobstate.UserSignal), as a root records it.
		Events: []raftstore.Event{{Time: now, Kind: raftstore.EventFailure, Rank: raftstore.NoRank, Detail: msg}}}
	if _, err := r.Apply(ctx, end); err != nil {
		// A failure of the job's already open (the root's own end was
		// under way): the end alone.
		end.Events = nil
		if _, err2 := r.Apply(ctx, end); err2 != nil {
			return fmt.Errorf("record its end: %w", errors.Join(err, err2))
		}
	}
	return r.Shutdown()
}

// lead waits until r, the only voter of its group, leads it.
func lead(ctx context.Context, r *raftstore.Replica) error {
	for {
		if r.IsLeader() {
			return nil
		}
		select {
		case _, ok := <-r.Leadership():
			if !ok {
				return errors.New("no leadership: the replica shut down")
			}
		case <-ctx.Done():
			return fmt.Errorf("no leadership: %w", ctx.Err())
		}
	}
}
