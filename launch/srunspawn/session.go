package srunspawn

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// ExitError is returned by Wait when srun exits non-zero or is killed.
type ExitError struct {
	Nodes []string
	// Code is srun's exit status: the highest exit status of the tasks, or
	// 128+n when a task was killed by signal n (137 after Close, 143 when
	// Slurm killed the job), or 1 or 2 for srun's own failures. -1 when
	// srun itself was killed by a signal (Signal says which).
	Code   int
	Signal syscall.Signal
	// Closed reports that the session had been closed before the step
	// ended, so that a kill was asked for.
	Closed bool
	// Lost lists the nodes srun reported a "Node failure" on: Slurm marked
	// them DOWN (after SlurmdTimeout) while the step ran there. srun runs
	// with --no-kill, so it exits 0 in that case; Wait still reports it.
	Lost []string
}

func (e *ExitError) Error() string {
	how := fmt.Sprintf("exit status %d", e.Code)
	if e.Code < 0 {
		how = "srun killed by signal " + e.Signal.String()
	}
	if len(e.Lost) > 0 {
		how = "node failure on " + strings.Join(e.Lost, ",")
		if e.Code != 0 {
			how += fmt.Sprintf(", exit status %d", e.Code)
		}
	}
	if e.Closed {
		how += " after Close"
	}
	return fmt.Sprintf("srun step on %s: %s", abbrev(e.Nodes, 4), how)
}

// Session is one srun process and its job step. Stdout and Stderr must
// both be read (or discarded) or srun, and with it the tasks, may block.
// Wait and Close may be called from any goroutine, more than once.
type Session struct {
	nodes   []string
	where   string
	opts    Options
	cmd     *exec.Cmd
	stdin   *os.File // srun's stdin, write end
	stdout  *os.File // srun's stdout, read end
	stderr  *bufPipe // srun's stderr without its informational lines
	timings spawn.Timings

	started   chan struct{} // closed once every node's tasks started
	stdinDone chan error    // the stdin payload's write result (buffered)
	done      chan struct{} // closed once srun exited and was reaped
	pumpDone  chan struct{} // closed once srun's stderr reached EOF

	mu        sync.Mutex
	waitErr   error // srun's exit, as exec reports it; valid after done
	closed    bool
	stepID    string
	head      []string        // srun's first stderr lines, for errors
	lost      []string        // nodes srun reported a node failure on
	up        map[string]bool // nodes whose tasks started
	stopTimer *time.Timer     // CloseGrace, then KillTimeout
}

var _ spawn.Session = (*Session)(nil)

// headLines bounds the stderr lines kept for error messages.
const headLines = 8

// newSession starts srun with pipes for its standard streams and the
// session's two goroutines: one reaps srun (it ends when srun exits),
// one reads its stderr (it ends at EOF, when srun has exited).
func newSession(cmd *exec.Cmd, nodes []string, where string, opts Options) (*Session, error) {
	inW, outR, errR, err := spawn.StartPiped(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	s := &Session{
		nodes:     nodes,
		where:     where,
		opts:      opts,
		cmd:       cmd,
		stdin:     inW,
		stdout:    outR,
		stderr:    newBufPipe(1 << 20),
		started:   make(chan struct{}),
		stdinDone: make(chan error, 1),
		done:      make(chan struct{}),
		pumpDone:  make(chan struct{}),
		up:        make(map[string]bool, len(nodes)),
	}
	go s.reap()
	go s.pump(errR)
	return s, nil
}

// reap waits for srun to exit.
func (s *Session) reap() {
	err := s.cmd.Wait()
	s.mu.Lock()
	s.waitErr = err
	if s.stopTimer != nil {
		s.stopTimer.Stop()
	}
	s.mu.Unlock()
	close(s.done)
}

// writeStdin writes the start payload; see Spawner.start.
func (s *Session) writeStdin(b []byte) {
	_, err := s.stdin.Write(b)
	s.stdinDone <- err
}

// srunLines are the patterns of srun's stderr lines that a session reads,
// compiled on first use: at package level they cost every ftlaunch
// process's start 0.3-0.5 ms (GODEBUG=inittrace=1), Slurm or not.
type srunLines struct {
	// "srun: launch/slurm: _task_start: Node node002, 1 tasks started"
	taskStart *regexp.Regexp
	// "srun: error: Node failure on node003"
	nodeFailure *regexp.Regexp
	// "srun: launching StepId=2.0 on host node002, 1 tasks: 0"
	stepID *regexp.Regexp
	// Lines that only -v makes srun print; they go to Logf.
	verbose *regexp.Regexp
}

var srunPatterns = sync.OnceValue(func() *srunLines {
	return &srunLines{
		taskStart:   regexp.MustCompile(`_task_start: Node (\S+), \d+ tasks started`),
		nodeFailure: regexp.MustCompile(`^srun: error: Node failure on (\S+)`),
		stepID:      regexp.MustCompile(`^srun: launching StepId=(\S+) on host`),
		verbose:     regexp.MustCompile(`^srun: (defined options|end of defined options|-{5,}|[A-Za-z0-9_() -]+ +: |jobid \d+: nodes\(|launching StepId=|[a-z_]+/[a-z0-9_]+: |Received task exit|Complete StepId=)`),
	}
})

// pump reads srun's stderr line by line: it notes the step id and the
// nodes whose tasks started, sends srun's informational lines to Logf and
// everything else on to the session's Stderr.
func (s *Session) pump(r *os.File) {
	defer close(s.pumpDone)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			s.line(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.logf("%s: read stderr: %v", s.where, err)
			}
			s.stderr.CloseWithError(nil)
			return
		}
	}
}

func (s *Session) line(line []byte) {
	text := strings.TrimRight(string(line), "\r\n")
	info := isInfo(text)
	s.mu.Lock()
	if !info && len(s.head) < headLines && strings.TrimSpace(text) != "" {
		s.head = append(s.head, text)
	}
	re := srunPatterns()
	if m := re.stepID.FindStringSubmatch(text); m != nil {
		s.stepID = m[1]
	}
	if m := re.nodeFailure.FindStringSubmatch(text); m != nil && !slices.Contains(s.lost, m[1]) {
		s.lost = append(s.lost, m[1])
	}
	if m := re.taskStart.FindStringSubmatch(text); m != nil {
		s.up[m[1]] = true
		if len(s.up) == len(s.nodes) && !isDone(s.started) {
			close(s.started)
		}
	}
	closed := s.closed
	s.mu.Unlock()
	// srun's answer to the SIGTERM of Close is ours, not news.
	if info || closed && text == "srun: forcing job termination" {
		s.logf("%s: %s", s.where, text)
		return
	}
	// Blocks only when a megabyte of stderr is unread.
	s.stderr.Write(line)
}

// isInfo reports whether a stderr line is one of srun's informational
// lines, which go to Logf instead of the session's Stderr.
func isInfo(text string) bool {
	return srunPatterns().verbose.MatchString(text) ||
		strings.HasPrefix(text, "srun: cluster configuration lacks support for cpu binding")
}

func (s *Session) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// Stdout returns the tasks' standard output.
func (s *Session) Stdout() io.Reader { return s.stdout }

// Stderr returns the tasks' standard error and srun's errors and
// warnings, without srun's informational lines.
func (s *Session) Stderr() io.Reader { return s.stderr }

// Timings reports the start: Total is from the call until srun reported
// the tasks of every node started and the stdin payload was written;
// Queued the wait for a slot under Options.MaxConcurrent; Attempts is 1.
func (s *Session) Timings() spawn.Timings { return s.timings }

// Nodes returns the step's nodes.
func (s *Session) Nodes() []string { return append([]string(nil), s.nodes...) }

// StepID returns the step's id, "JOB.STEP", as srun reported it.
func (s *Session) StepID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stepID
}

// PID returns srun's process id.
func (s *Session) PID() int { return s.cmd.Process.Pid }

// Wait waits for srun to exit and reports how the step ended: nil when
// every task exited 0, an *ExitError otherwise, also when srun exited 0
// after a node failure (ExitError.Lost). Every call returns the same
// result.
func (s *Session) Wait() error {
	<-s.done
	<-s.pumpDone // srun's last lines name the lost nodes
	return s.exitErr()
}

// exitErr converts srun's exit; call after done.
func (s *Session) exitErr() error {
	s.mu.Lock()
	err, closed, lost := s.waitErr, s.closed, slices.Clone(s.lost)
	s.mu.Unlock()
	if err == nil {
		if len(lost) > 0 {
			return &ExitError{Nodes: s.Nodes(), Closed: closed, Lost: lost}
		}
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("%s: wait: %w", s.where, err)
	}
	xe := &ExitError{Nodes: s.Nodes(), Code: ee.ExitCode(), Closed: closed, Lost: lost}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		xe.Code, xe.Signal = -1, ws.Signal()
	}
	return xe
}

// stderrHead returns srun's first stderr lines, joined.
func (s *Session) stderrHead() string {
	// srun's last words are written before it exits; the pump has them
	// once it reaches EOF.
	select {
	case <-s.done:
		<-s.pumpDone
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.head) == 0 {
		return "(nothing)"
	}
	return strings.Join(s.head, " | ")
}

// Close ends the session: it closes srun's stdin, so every task reads
// EOF, then (after Options.CloseGrace) sends srun SIGTERM, on which srun
// cancels the step and slurmstepd kills its tasks; SIGKILL follows
// Options.KillTimeout later if srun is still there. Close does not wait;
// Wait does.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.stdin.Close()
	select {
	case <-s.done:
		return nil
	default:
	}
	if s.opts.CloseGrace > 0 {
		s.setTimer(s.opts.CloseGrace, s.terminate)
	} else {
		s.terminate()
	}
	if err != nil {
		return fmt.Errorf("%s: close stdin: %w", s.where, err)
	}
	return nil
}

// Kill ends the session at once: srun's stdin is closed and its process
// group (srun and the helper process it forks) gets SIGKILL. Use it for a
// step whose node is lost, where srun's own cancellation can wait for
// Slurm to notice the node (SlurmdTimeout); the step's processes on live
// nodes are left to the agents (they see stdin EOF) and to Slurm.
func (s *Session) Kill() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stdin.Close()
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: kill srun: %w", s.where, err)
	}
	return nil
}

// abandon ends a session that Start does not return: Close, and no one
// will read its output.
func (s *Session) abandon() {
	s.Close()
	s.stdout.Close()
	s.stderr.CloseWithError(errAbandoned)
}

var errAbandoned = errors.New("session abandoned")

// terminate sends srun SIGTERM and arms the SIGKILL.
func (s *Session) terminate() {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.logf("%s: SIGTERM: %v", s.where, err)
	}
	s.setTimer(s.opts.KillTimeout, func() {
		s.logf("%s: srun still runs %v after SIGTERM; sending SIGKILL (step %s may be left to Slurm)", s.where, s.opts.KillTimeout, s.StepID())
		s.cmd.Process.Kill()
	})
}

// setTimer replaces the session's timer, unless srun has exited.
func (s *Session) setTimer(d time.Duration, f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return
	default:
	}
	if s.stopTimer != nil {
		s.stopTimer.Stop()
	}
	s.stopTimer = time.AfterFunc(d, f)
}

// bufPipe is a pipe with a buffer: writes block only when max bytes are
// unread, so that srun's stderr is read (and the start line seen) even
// before anyone reads the session's Stderr.
type bufPipe struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  bytes.Buffer
	max  int
	err  error // set once the writer closed; io.EOF for a clean close
}

func newBufPipe(max int) *bufPipe {
	p := &bufPipe{max: max}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *bufPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() >= p.max && p.err == nil {
		p.cond.Wait()
	}
	if p.err != nil {
		return 0, io.ErrClosedPipe
	}
	p.buf.Write(b)
	p.cond.Broadcast()
	return len(b), nil
}

func (p *bufPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() == 0 && p.err == nil {
		p.cond.Wait()
	}
	if p.buf.Len() > 0 {
		n, _ := p.buf.Read(b)
		p.cond.Broadcast()
		return n, nil
	}
	return 0, p.err
}

// CloseWithError ends the writer's side: readers get the rest, then err
// (io.EOF when nil).
func (p *bufPipe) CloseWithError(err error) {
	if err == nil {
		err = io.EOF
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	p.cond.Broadcast()
}
