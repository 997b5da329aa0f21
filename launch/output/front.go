package output

// The front-end's side of the user's session besides the output itself:
// which numbered output frame of an agent is written next, stdin paced to
// rank 0's agent, the signals forwarded to the ranks, and the live launch
// line.

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// Next is which numbered output frame of an agent the root writes next
// (launch/proto/outq.go): 1 for a new agent, 0 before a new root learns it
// (a successor's, from the agent's resync). Owned by the root's loop.
type Next uint64

// Take decides whether the root writes the agent's frame seq: only the
// one it expects next.
func (n *Next) Take(seq uint64) bool {
	if *n == 0 || seq != uint64(*n) {
		return false
	}
	*n++
	return true
}

// Resync takes an agent's word on where its resent output begins.
func (n *Next) Resync(first uint64) {
	if *n == 0 || first > uint64(*n) {
		*n = Next(first)
	}
}

// stdinWindow is how many chunks of stdin may be unacknowledged.
const stdinWindow = 4

// Chunk is a piece of the front-end's stdin for rank 0 (EOF: stdin ended).
type Chunk struct {
	Data []byte
	EOF  bool
}

// Stdin forwards the front-end's stdin to rank 0's agent, paced by the
// agent's acknowledgements (at most stdinWindow chunks unacknowledged).
// Read runs on a goroutine of its own; the other methods are the root's
// loop's, which holds the chunks until rank 0's agent is up.
type Stdin struct {
	r       io.Reader
	credit  chan struct{}
	pending []Chunk
}

// NewStdin forwards r.
func NewStdin(r io.Reader) *Stdin {
	s := &Stdin{r: r, credit: make(chan struct{}, stdinWindow)}
	for range stdinWindow {
		s.credit <- struct{}{}
	}
	return s
}

// Read reads stdin in chunks, each once a credit allows, and posts each
// (post returns false once nobody takes it); it ends at stdin's end
// (posted as EOF) or with ctx. A read of a terminal cannot be
// interrupted: its goroutine ends with the process.
func (s *Stdin) Read(ctx context.Context, post func(Chunk) bool) {
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-s.credit:
		case <-ctx.Done():
			return
		}
		n, err := s.r.Read(buf)
		if n > 0 && !post(Chunk{Data: slices.Clone(buf[:n])}) {
			return
		}
		if err != nil {
			post(Chunk{EOF: true})
			return
		}
	}
}

// Start runs Read on a goroutine of its own; stop ends it and joins it
// (done is closed as it ends). post is given Start's context, which stop
// cancels: a post that waits must give up with it. A read of a pipe
// through Go's poller is interrupted by a read deadline, taken back once
// the reader ended; one that is not (a terminal's, or a descriptor in
// blocking mode, as a shell's pipe usually is) cannot be: stop returns
// without it, and it ends with its next read or the process.
func (s *Stdin) Start(ctx context.Context, post func(context.Context, Chunk) bool) (stop func(), done <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	go func() { // joined by stop, unless its read cannot be interrupted
		defer close(ended)
		s.Read(ctx, func(c Chunk) bool { return ctx.Err() == nil && post(ctx, c) })
	}()
	return func() {
		cancel()
		d, ok := s.r.(interface{ SetReadDeadline(time.Time) error })
		if !ok || d.SetReadDeadline(time.Now()) != nil {
			return
		}
		<-ended
		_ = d.SetReadDeadline(time.Time{})
	}, ended
}

// Acked gives back a credit: rank 0's agent took a chunk (MStdinAck).
func (s *Stdin) Acked() {
	select {
	case s.credit <- struct{}{}:
	default:
	}
}

// Queue holds a chunk for rank 0's agent until Flush.
func (s *Stdin) Queue(c Chunk) { s.pending = append(s.pending, c) }

// Flush sends the chunks held to rank 0's agent (send: its handle's),
// until a send fails (its link is gone: stdin goes nowhere).
func (s *Stdin) Flush(send func(typ uint8, p []byte) error) {
	for _, c := range s.pending {
		if c.EOF {
			_ = send(proto.MStdinClose, nil)
		} else if send(proto.MStdin, c.Data) != nil {
			break
		}
	}
	s.pending = nil
}

// StopGate decides which SIGCONT the front-end forwards to the ranks: only
// one that follows a stop it forwarded them (SIGTSTP, as Ctrl-Z sends). A
// SIGCONT that ends a stop of the front-end itself (SIGSTOP, which it
// cannot catch: a debugger, a job scheduler's suspend, a test's stall) is
// its own: the ranks were never stopped, and a rank that traps SIGCONT
// would take it for a resume that never was. Owned by the root's loop.
type StopGate struct {
	stopped bool // a stop was forwarded and no SIGCONT since
}

// Forward returns the signal that goes on to the ranks for sig, if any,
// and notes a stop that does. A terminal's stop signals (SIGTSTP, SIGTTIN,
// SIGTTOU) go on as SIGSTOP: each rank is a session of its own, an
// orphaned process group, whose processes the kernel does not stop for
// those.
func (g *StopGate) Forward(sig os.Signal) (os.Signal, bool) {
	switch sig {
	case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		g.stopped = true
		return syscall.SIGSTOP, true
	case syscall.SIGCONT:
		if !g.stopped {
			return sig, false
		}
		g.stopped = false
	}
	return sig, true
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Progress is the live launch line (ProgressOn): agents up and ranks
// running, until every rank runs or the job failed, when it goes for
// good. The zero value shows none.
type Progress struct{ live bool }

// ProgressOn is a live launch line if stderr is a terminal and the user
// did not ask for --verbose (whose lines it would break).
func ProgressOn(stderr io.Writer, verbose bool) Progress {
	return Progress{live: !verbose && IsTerminal(stderr)}
}

// Show updates the line on w: up agents of all, ranks of n running; a
// launch over (every rank runs, or failed) clears it.
func (p *Progress) Show(w *Writer, up, all, ranks, n int, failed bool) {
	if !p.live {
		return
	}
	if ranks >= n || failed {
		p.live = false
		w.Push(Item{Progress: true})
		return
	}
	w.Push(Item{Progress: true, Data: []byte(fmt.Sprintf("ftlaunch: %d/%d agents up, %d/%d ranks running", up, all, ranks, n))})
}

// Pollable returns a file reading f's pipe or socket through Go's poller,
// so that a read blocked in it is interrupted by a deadline (a read of a
// descriptor in blocking mode, as a shell's pipe usually is, cannot be):
// a non-blocking copy of its descriptor. A terminal, a regular file or nil
// is returned as it is. restore puts the descriptor back in blocking mode
// (the mode is its open file's, which it may share with the shell and the
// commands after this one) and closes the copy.
func Pollable(f *os.File) (pf *os.File, restore func()) {
	if f == nil {
		return nil, func() {}
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return f, func() {}
	}
	if m := st.Mode & unix.S_IFMT; m != unix.S_IFIFO && m != unix.S_IFSOCK {
		return f, func() {}
	}
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return f, func() {}
	}
	unix.CloseOnExec(fd)
	if unix.SetNonblock(fd, true) != nil {
		unix.Close(fd)
		return f, func() {}
	}
	pf = os.NewFile(uintptr(fd), f.Name())
	return pf, func() {
		_ = unix.SetNonblock(fd, false)
		pf.Close()
	}
}
