// Package jobctl finds, lists and stops jobs: what `ftlaunch jobs`,
// `ftlaunch cancel` and `ftlaunch kill` do. Jobs are listed from the state
// directory (launch/jobstate reads each); a running job is reached at its
// root, wherever it runs now (the front-end, or the replica agent that
// took over), over the job's own mutual TLS with the controller's
// credentials its root left in the job's directory (launch/proto's
// control.go). There is no other control port.
package jobctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// Job is one job of a state directory, as `ftlaunch jobs` lists it.
type Job struct {
	ID    string `json:"id"`
	Dir   string `json:"dir"`
	State string `json:"state"` // running, finished, failed, cancelled, unfinished
	Ranks int    `json:"ranks"`
	Nodes int    `json:"nodes"`
	// Start is when the front-end started the job (zero: not known yet);
	// Duration how long it ran, in seconds: until its end, or until now.
	Start    time.Time `json:"start,omitzero"`
	Duration float64   `json:"duration_s"`
	ExitCode *int      `json:"exit_code,omitempty"`
	// Restarts counts the failures recovered (ranks or nodes started
	// again); a successor root counts from its takeover.
	Restarts int      `json:"restarts"`
	Argv     []string `json:"argv,omitempty"`
	Root     string   `json:"root,omitempty"`  // a running job's root node, when its live report says
	Error    string   `json:"error,omitempty"` // why the job's files could not be read
}

// List reads every job of stateDir ("": the default state directory),
// newest first. A running job's files are locked: it is read from its
// live report, never waited for.
func List(stateDir string) ([]Job, error) {
	if stateDir == "" {
		d, err := journal.DefaultStateDir()
		if err != nil {
			return nil, err
		}
		stateDir = d
	}
	entries, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no job was ever run here
	}
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var jobs []Job
	modified := map[string]time.Time{}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "ft-") {
			continue
		}
		dir := filepath.Join(stateDir, e.Name())
		if fi, err := e.Info(); err == nil {
			modified[e.Name()] = fi.ModTime()
		}
		jobs = append(jobs, read(dir))
	}
	// Newest first: by start, else by the directory's change.
	when := func(j Job) time.Time { return cmp.Or(j.Start, modified[j.ID]) }
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Or(when(b).Compare(when(a)), strings.Compare(a.ID, b.ID)) })
	return jobs, nil
}

// read sums up one job's directory.
func read(dir string) Job {
	j := Job{ID: filepath.Base(dir), Dir: dir}
	st, err := jobstate.ReadStatus("", dir)
	if err != nil {
		j.State, j.Error = "unreadable", err.Error()
		return j
	}
	j.State, j.Ranks, j.Nodes, j.Start, j.ExitCode, j.Argv = st.Word(), st.N, st.Nodes, st.Start, st.ExitCode, st.Argv
	j.Restarts = st.Recoveries
	switch {
	case st.Live != nil:
		j.Root, j.Restarts = st.Live.Root, st.Live.Recoveries
		j.Duration = time.Since(st.Start).Seconds()
	case !st.End.IsZero():
		j.Duration = st.End.Sub(st.Start).Seconds()
	}
	return j
}

// ErrEnded says that the job a controller names is not running.
type ErrEnded struct{ Status *jobstate.Status }

func (e *ErrEnded) Error() string {
	st := e.Status
	switch st.State {
	case "finished":
		return fmt.Sprintf("job %s has ended: %s, exit code %d", st.Job, st.Word(), *st.ExitCode)
	default:
		return fmt.Sprintf("job %s has ended without a final status (%s)", st.Job, st.State)
	}
}

// Options bound a controller's wait.
type Options struct {
	// Reach bounds the search for a root that answers (a successor may
	// be taking over); End bounds cancel's wait for the job's end.
	Reach, End time.Duration
	// Poll is how often the job's files are read again.
	Poll time.Duration
	// From says who asks, in the root's log (default: Caller of the
	// command: ftlaunch cancel, ftlaunch kill).
	From string
	// Fencing reaches the nodes of a job none of whose roots answers.
	Fencing Fencing
}

func (o Options) withDefaults() Options {
	o.Reach = cmp.Or(o.Reach, 30*time.Second)
	o.End = cmp.Or(o.End, 60*time.Second)
	o.Poll = cmp.Or(o.Poll, 100*time.Millisecond)
	return o
}

// Ended is how a controller ended a job: its final status, as its files
// say once it ended, and, for a job none of whose roots answered, what
// the fences of its nodes did (Fenced; Status is then nil when its end
// could not be recorded).
type Ended struct {
	Status *jobstate.Status
	Fenced *Fenced
}

// Cancel ends the job target names (a job id, its directory, "": the
// latest) as the user's SIGTERM: every rank gets SIGTERM, then SIGKILL
// after the job's --kill-after; nothing restarts. It returns once the job
// ended, with its final status; a job that has ended gives *ErrEnded. A
// job none of whose roots answers (it ended without a final status: its
// front-end is gone, and its replicas if it had any) has its nodes fenced
// from its recorded node table, and its end recorded as the user's
// SIGTERM when its state log can be written.
func Cancel(ctx context.Context, stateDir, target string, o Options) (*Ended, error) {
	o = o.withDefaults()
	from := cmp.Or(o.From, Caller("ftlaunch cancel"))
	jobDir, err := running(stateDir, target)
	if err == nil {
		_, err = send(ctx, jobDir, proto.Control{Op: proto.OpCancel, Signal: int(syscall.SIGTERM), From: from}, o)
	}
	if st, ok := noRoot(err); ok {
		return fenceEnded(ctx, st, syscall.SIGTERM, from, o)
	}
	if err != nil {
		return nil, err
	}
	st, err := awaitEnd(ctx, jobDir, o)
	if err != nil {
		return nil, err
	}
	return &Ended{Status: st}, nil
}

// fenceEnded fences the nodes of a job none of whose roots answers (st:
// its status, unfinished) and reads its status again.
func fenceEnded(ctx context.Context, st *jobstate.Status, sig syscall.Signal, from string, o Options) (*Ended, error) {
	f, err := fenceJob(ctx, st.StateDir, sig, from, o)
	if err != nil {
		return nil, err
	}
	e := &Ended{Fenced: f}
	if f.Recorded {
		if e.Status, err = jobstate.ReadStatus("", st.StateDir); err != nil {
			return e, fmt.Errorf("job %s: read its status again: %w", f.Job, err)
		}
	}
	return e, nil
}

// Kill sends signal sig to every rank of the job target names and returns
// the node of the root that passed it on. A rank that dies of it was
// ended by the user: the job ends as the user's signal, nothing restarts.
// A job none of whose roots answers gets an ending signal (SIGINT,
// SIGTERM, SIGHUP, SIGQUIT, SIGKILL) as Cancel does, by fencing its nodes
// (Ended says what it did); another signal is refused.
func Kill(ctx context.Context, stateDir, target string, sig syscall.Signal, o Options) (string, *Ended, error) {
	o = o.withDefaults()
	from := cmp.Or(o.From, Caller("ftlaunch kill"))
	jobDir, err := running(stateDir, target)
	root := ""
	if err == nil {
		root, err = send(ctx, jobDir, proto.Control{Op: proto.OpSignal, Signal: int(sig), From: from}, o)
	}
	st, ok := noRoot(err)
	switch {
	case ok && endingSignal(sig):
		e, err := fenceEnded(ctx, st, sig, from, o)
		return "", e, err
	case ok:
		return "", nil, fmt.Errorf("job %s: no root answers (its end was never recorded): only an ending signal (INT, TERM, HUP, QUIT, KILL) can reach its ranks, by fencing its nodes", st.Job)
	}
	return root, nil, err
}

// running resolves target to a running job's directory.
func running(stateDir, target string) (string, error) {
	jobDir, _, err := jobstate.Resolve(stateDir, target)
	if err != nil {
		return "", err
	}
	st, err := jobstate.ReadStatus(stateDir, jobDir)
	if err != nil {
		return "", err
	}
	if st.State != "running" {
		return "", &ErrEnded{Status: st}
	}
	return jobDir, nil
}

// awaitEnd waits until the job's files are no longer held: its final
// status is committed and its replicas closed.
func awaitEnd(ctx context.Context, jobDir string, o Options) (*jobstate.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, o.End)
	defer cancel()
	t := time.NewTicker(o.Poll)
	defer t.Stop()
	for {
		st, err := jobstate.ReadStatus("", jobDir)
		if err == nil && st.State != "running" {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("job %s: still running %v after it was cancelled: %w", filepath.Base(jobDir), o.End, ctx.Err())
		case <-t.C:
		}
	}
}

// send hands req to the job's root, trying again (a successor may be
// taking over, and rewrites where it listens) until one answers, the job
// ends, or o.Reach passed. It returns the root's node.
func send(ctx context.Context, jobDir string, req proto.Control, o Options) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Reach)
	defer cancel()
	t := time.NewTicker(o.Poll)
	defer t.Stop()
	var last error
	for {
		root, err := sendOnce(ctx, jobDir, req)
		if err == nil {
			return root, nil
		}
		var refused *refusedError
		if errors.As(err, &refused) {
			return "", err // the root answered: asking again gets the same answer
		}
		last = err
		if st, err := jobstate.ReadStatus("", jobDir); err == nil && st.State != "running" {
			return "", &ErrEnded{Status: st}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("job %s: no root answered within %v: %w", filepath.Base(jobDir), o.Reach, last)
		case <-t.C:
		}
	}
}

// refusedError is a root's refusal of a request.
type refusedError struct{ root, msg string }

func (e *refusedError) Error() string {
	return fmt.Sprintf("the root on %s refused: %s", e.root, e.msg)
}

// sendOnce tries the root the job's control file names, once.
func sendOnce(ctx context.Context, jobDir string, req proto.Control) (string, error) {
	ci, err := proto.ReadControlInfo(jobDir)
	if err != nil {
		return "", fmt.Errorf("where the root listens: %w", err)
	}
	if len(ci.Addrs) == 0 {
		return ci.Root, signalFrontend(ci, req)
	}
	b, err := os.ReadFile(filepath.Join(jobDir, proto.ControlKey))
	if err != nil {
		return "", fmt.Errorf("the job's control credentials: %w", err)
	}
	creds, err := secure.UnmarshalCredentials(b)
	if err != nil {
		return "", fmt.Errorf("the job's control credentials: %w", err)
	}
	var errs []error
	for _, addr := range ci.Addrs {
		ack, err := ask(ctx, addr, ci.Name, creds, req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ack.Err != "" {
			return ack.Root, &refusedError{root: ack.Root, msg: ack.Err}
		}
		return ack.Root, nil
	}
	return "", fmt.Errorf("the root on %s: %w", ci.Root, errors.Join(errs...))
}

// ask sends one request to the root at addr and reads its answer.
func ask(ctx context.Context, addr, name string, creds *secure.Credentials, req proto.Control) (proto.ControlAck, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := secure.Dial(dctx, addr, creds, secure.WithPeerName(name))
	if err != nil {
		return proto.ControlAck{}, err
	}
	defer conn.Close()
	deadline, _ := dctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if err := wire.WriteFrame(conn, proto.MHello, proto.Hello{Idx: 0, Control: true}.Encode()); err != nil {
		return proto.ControlAck{}, fmt.Errorf("control request to %s: %w", addr, err)
	}
	if err := wire.WriteFrame(conn, proto.MControl, req.Encode()); err != nil {
		return proto.ControlAck{}, fmt.Errorf("control request to %s: %w", addr, err)
	}
	f, err := wire.ReadFrame(conn, 4096)
	if err != nil {
		return proto.ControlAck{}, fmt.Errorf("control answer from %s: %w", addr, err)
	}
	if f.Type != proto.MControlAck {
		return proto.ControlAck{}, fmt.Errorf("control answer from %s: message type %d", addr, f.Type)
	}
	return proto.DecodeControlAck(f.Payload)
}

// signalFrontend reaches the front-end of a job without a launch tree
// (every agent a local process; no listener, no job CA) by its PID: the
// operating system checks that the caller may signal it. It takes the
// signals the front-end forwards; SIGINT, SIGTERM and SIGHUP end the job.
func signalFrontend(ci proto.ControlInfo, req proto.Control) error {
	host, _ := os.Hostname()
	if ci.Host != host {
		return fmt.Errorf("the job's front-end runs on %s (pid %d), not on this host: run this there", ci.Host, ci.PID)
	}
	s := syscall.Signal(req.Signal)
	switch s {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT:
	default:
		return &refusedError{root: ci.Root, msg: fmt.Sprintf("a job without a launch tree (its ranks all on the front-end's host) takes SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 or SIGCONT, not %s", unix.SignalName(s))}
	}
	if err := syscall.Kill(ci.PID, s); err != nil {
		return fmt.Errorf("signal the front-end (pid %d): %w", ci.PID, err)
	}
	return nil
}

// caller names who asks, for the root's log: user@host, pid.
func caller() string {
	name := "?"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s (pid %d)", name, host, os.Getpid())
}

// ParseSignal reads a signal's name or number: KILL, SIGKILL, sigkill, 9.
func ParseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n >= 65 {
			return 0, fmt.Errorf("no signal %d", n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("no signal %q (try a name such as TERM, KILL, USR1, or a number)", s)
}

// FrontEnd says whether a running job's root is still its front-end (a
// successor rewrites the control file; a front-end on this host must also
// still run), and where it runs.
func FrontEnd(jobDir string) (host string, pid int, ok bool) {
	ci, err := proto.ReadControlInfo(jobDir)
	if err != nil || ci.Name != proto.RootName {
		return "", 0, false
	}
	if h, _ := os.Hostname(); h == ci.Host && errors.Is(syscall.Kill(ci.PID, 0), syscall.ESRCH) {
		return "", 0, false // gone: a successor has not written its place yet
	}
	return ci.Host, ci.PID, true
}

// Caller names this process for a root's log, with the command that
// asks: "ada@node0 (pid 4242) with ftlaunch attach".
func Caller(command string) string { return caller() + " with " + command }
