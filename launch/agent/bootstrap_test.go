package agent

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// endsRead is a reader whose blocked Read tells when it returned (ended);
// it passes a deadline or a close on to r, where r takes them.
type endsRead struct {
	r     io.Reader
	once  sync.Once
	ended chan struct{}
}

func (e *endsRead) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.ended) })
	}
	return n, err
}

func (e *endsRead) SetReadDeadline(t time.Time) error {
	if d, ok := e.r.(interface{ SetReadDeadline(time.Time) error }); ok {
		return d.SetReadDeadline(t)
	}
	return errors.ErrUnsupported
}

func (e *endsRead) Close() error {
	if c, ok := e.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// TestReadBootstrapJoinsItsReader: a parent that sends no bootstrap is
// given up after the bound, and the read of the agent's stdin has ended
// when readBootstrap returns (it was left behind before): a pipe read
// through Go's poller (as pollableStdin makes the session's) by a
// deadline, a test's io.Pipe by its close.
func TestReadBootstrapJoinsItsReader(t *testing.T) {
	for name, src := range silentStdins(t) {
		er := &endsRead{r: src, ended: make(chan struct{})}
		began := time.Now()
		if _, err := readBootstrap(er, 10*time.Millisecond); err == nil {
			t.Fatalf("%s: a bootstrap from a silent parent", name)
		}
		select {
		case <-er.ended:
		default:
			t.Errorf("%s: the read of stdin still ran when readBootstrap returned (after %v)", name, time.Since(began))
		}
	}
}

// silentStdins are an agent's stdin as its parent leaves it silent: a
// session's pipe read through Go's poller (as pollableStdin makes it),
// and a test's io.Pipe; closed at the test's end.
func silentStdins(t *testing.T) map[string]io.Reader {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	ir, iw := io.Pipe()
	t.Cleanup(func() { r.Close(); w.Close(); iw.Close() })
	return map[string]io.Reader{"a session's pipe": r, "a test's pipe": ir}
}
