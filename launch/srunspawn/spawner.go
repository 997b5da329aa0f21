package srunspawn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// Defaults for the zero values of Options.
const (
	DefaultSrun          = "srun"
	DefaultMaxConcurrent = 16
	DefaultStartTimeout  = 60 * time.Second
	DefaultKillTimeout   = 45 * time.Second
)

// Errors that New and Start return, wrapped with details; test with
// errors.Is.
var (
	// ErrSrunNotFound: the srun program is not found.
	ErrSrunNotFound = errors.New("srun not found")
	// ErrNoAllocation: the environment names no Slurm allocation
	// (SLURM_JOB_ID unset) or no node list (SLURM_JOB_NODELIST).
	ErrNoAllocation = errors.New("not inside a Slurm allocation")
	// ErrNotAllocated: a host is not one of the allocation's nodes.
	ErrNotAllocated = errors.New("host not in the allocation")
	// ErrSrunFailed: srun ended before the step's tasks started.
	ErrSrunFailed = errors.New("srun failed before the step started")
)

// Options configure a Spawner. The zero value is usable inside an
// allocation with srun in PATH.
type Options struct {
	// Srun is the srun program: a path, or a name looked up in PATH.
	// "" means "srun". A wrapper script is fine if it execs srun (signals
	// must reach srun itself).
	Srun string
	// Env is added to this process's environment for srun (and, since
	// srun exports its environment, for the agents). SLURM_CONF,
	// SLURM_JOB_ID and SLURM_JOB_NODELIST are taken from the resulting
	// environment; Env may set them.
	Env []string
	// ExtraArgs are passed to srun before the command (for example
	// "--export=NONE" or a site's "--gres=none"); they must not conflict
	// with the options the package sets.
	ExtraArgs []string
	// MaxConcurrent bounds the srun processes that are starting at once:
	// Start and StartGroup calls in progress (0: 16). Each one is a step
	// creation RPC to slurmctld and a few tenths of a CPU-second locally.
	// Running sessions do not count.
	MaxConcurrent int
	// StartTimeout bounds the wait for srun to report the tasks started,
	// when ctx has no earlier deadline (0: 60 s).
	StartTimeout time.Duration
	// CloseGrace is how long Close leaves the agents after closing their
	// stdin before it has srun cancel the step (0: at once).
	CloseGrace time.Duration
	// KillTimeout is how long srun gets to cancel the step after SIGTERM
	// before it is sent SIGKILL (0: 45 s: srun itself waits up to
	// slurm.conf's KillWait, 30 s by default, plus 2 s for the step).
	KillTimeout time.Duration
	// Logf, if set, receives srun's informational lines and the package's
	// own notes. It may be called from several goroutines at once.
	Logf func(format string, args ...any)
}

// Spawner starts agents as Slurm job steps with srun. Its methods are safe
// for concurrent use. It holds no process of its own: each Session owns
// its srun.
type Spawner struct {
	opts  Options
	srun  string   // resolved path
	env   []string // environment for srun
	job   string   // SLURM_JOB_ID
	nodes []string // the allocation's nodes, from SLURM_JOB_NODELIST
	sem   chan struct{}
}

var _ spawn.Spawner = (*Spawner)(nil)

// New makes a Spawner for the allocation named by the environment
// (os.Environ() followed by opts.Env). It fails with ErrSrunNotFound or
// ErrNoAllocation (wrapped) when srun or the allocation is missing.
func New(opts Options) (*Spawner, error) {
	if opts.MaxConcurrent < 0 || opts.StartTimeout < 0 || opts.CloseGrace < 0 || opts.KillTimeout < 0 {
		return nil, errors.New("srunspawn: negative limit in Options")
	}
	setDefault(&opts.Srun, DefaultSrun)
	setDefault(&opts.MaxConcurrent, DefaultMaxConcurrent)
	setDefault(&opts.StartTimeout, DefaultStartTimeout)
	setDefault(&opts.KillTimeout, DefaultKillTimeout)

	path, err := exec.LookPath(opts.Srun)
	if err != nil {
		return nil, fmt.Errorf("srunspawn: %w: %v", ErrSrunNotFound, err)
	}
	env := append(os.Environ(), opts.Env...)
	job := lookupEnv(env, "SLURM_JOB_ID")
	if job == "" {
		job = lookupEnv(env, "SLURM_JOBID")
	}
	if job == "" {
		return nil, fmt.Errorf("srunspawn: %w: SLURM_JOB_ID is not set (run ftlaunch under salloc or sbatch)", ErrNoAllocation)
	}
	list := lookupEnv(env, "SLURM_JOB_NODELIST")
	if list == "" {
		list = lookupEnv(env, "SLURM_NODELIST")
	}
	if list == "" {
		return nil, fmt.Errorf("srunspawn: %w: job %s but SLURM_JOB_NODELIST is not set", ErrNoAllocation, job)
	}
	nodes, err := alloc.ExpandHostlist(list)
	if err != nil {
		return nil, fmt.Errorf("srunspawn: SLURM_JOB_NODELIST %q: %w", list, err)
	}
	return &Spawner{
		opts:  opts,
		srun:  path,
		env:   env,
		job:   job,
		nodes: nodes,
		sem:   make(chan struct{}, opts.MaxConcurrent),
	}, nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// lookupEnv returns the last value of key in env, as exec does.
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// JobID returns the allocation's job id.
func (s *Spawner) JobID() string { return s.job }

// Nodes returns the allocation's nodes, in SLURM_JOB_NODELIST order.
func (s *Spawner) Nodes() []string { return slices.Clone(s.nodes) }

// Start runs argv on host as a one-task job step and writes stdin to its
// standard input, which then stays open until the session is closed. It
// returns once srun reports the task started (see the package
// documentation). ctx bounds the start, not the session. The Session is a
// *Session.
func (s *Spawner) Start(ctx context.Context, host string, argv []string, stdin []byte) (spawn.Session, error) {
	sess, err := s.start(ctx, []string{host}, argv, stdin)
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// StartGroup runs argv once on each of hosts as one job step (one task per
// node) and writes stdin to every task's standard input, which then stays
// open until the session is closed. The session's Stdout and Stderr carry
// every task's output, interleaved; Wait reports the step as a whole. The
// Session is a *Session.
func (s *Spawner) StartGroup(ctx context.Context, hosts []string, argv []string, stdin []byte) (spawn.Session, error) {
	sess, err := s.start(ctx, hosts, argv, stdin)
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// Args returns srun's arguments for a step of argv on hosts, one task per
// host.
func (s *Spawner) Args(hosts []string, argv []string) []string {
	k := strconv.Itoa(len(hosts))
	args := []string{
		"-v",
		"--overlap",
		"--nodes=" + k, "--ntasks=" + k, "--ntasks-per-node=1",
		"--nodelist=" + strings.Join(hosts, ","),
		"--mpi=none",
		"--cpu-bind=none",
		"--kill-on-bad-exit=0",
		"--wait=0",
		"--no-kill",
		"--input=all",
	}
	args = append(args, s.opts.ExtraArgs...)
	return append(append(args, "--"), argv...)
}

// checkHosts validates a step's host list against the allocation.
func (s *Spawner) checkHosts(hosts []string) error {
	if len(hosts) == 0 {
		return errors.New("srunspawn: no hosts")
	}
	seen := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		if h == "" || strings.ContainsAny(h, ", \t\n[]") {
			return fmt.Errorf("srunspawn: bad host name %q", h)
		}
		if seen[h] {
			return fmt.Errorf("srunspawn: host %s named twice", h)
		}
		seen[h] = true
		if !slices.Contains(s.nodes, h) {
			return fmt.Errorf("srunspawn: %s: %w %s (%d nodes: %s)", h, ErrNotAllocated, s.job, len(s.nodes), abbrev(s.nodes, 8))
		}
	}
	return nil
}

// abbrev lists at most n names.
func abbrev(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ",")
	}
	return strings.Join(names[:n], ",") + fmt.Sprintf(",... (%d more)", len(names)-n)
}

func (s *Spawner) start(ctx context.Context, hosts []string, argv []string, stdin []byte) (*Session, error) {
	begin := time.Now()
	if len(argv) == 0 {
		return nil, errors.New("srunspawn: empty command")
	}
	if err := s.checkHosts(hosts); err != nil {
		return nil, err
	}
	where := "srun on " + abbrev(hosts, 4)

	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: waiting for a launch slot: %w", where, ctx.Err())
	}
	defer func() { <-s.sem }()
	queued := time.Since(begin)

	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()

	cmd := exec.Command(s.srun, s.Args(hosts, argv)...)
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	sess, err := newSession(cmd, hosts, where, s.opts)
	if err != nil {
		return nil, err
	}

	if len(stdin) > 0 {
		// A write beyond the pipe's buffer (64 KiB) blocks until srun reads,
		// which it does once the tasks run: write beside the wait. The
		// goroutine ends when the write completes or the pipe is closed.
		go sess.writeStdin(stdin)
	} else {
		sess.stdinDone <- nil
	}

	select {
	case <-sess.started:
	case <-sess.done:
	case <-ctx.Done():
	}
	select {
	case <-sess.started: // a step that started and already ended is fine
	default:
		if isDone(sess.done) {
			err := fmt.Errorf("%s: %w: %v; srun said: %s", where, ErrSrunFailed, sess.exitErr(), sess.stderrHead())
			sess.abandon()
			return nil, err
		}
		sess.abandon()
		return nil, fmt.Errorf("%s: tasks not started: %w; srun said: %s", where, ctx.Err(), sess.stderrHead())
	}
	select {
	case err := <-sess.stdinDone:
		// A step that ended before its payload could be written is
		// reported by Wait.
		if err != nil && !isDone(sess.done) {
			sess.abandon()
			return nil, fmt.Errorf("%s: write stdin: %w", where, err)
		}
	case <-sess.done:
	case <-ctx.Done():
		sess.abandon()
		return nil, fmt.Errorf("%s: write stdin: %w", where, ctx.Err())
	}
	sess.timings = spawn.Timings{Total: time.Since(begin), Queued: queued, Attempts: 1}
	return sess, nil
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
