package output

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The front-end's stdin, a pipe, is read through Go's poller: a read
// blocked in it ends at a deadline (the job's end joins its reader), and
// restore puts the pipe back in blocking mode for whoever reads it next.
func TestPollableStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	f, restore := Pollable(r)
	if f == r {
		t.Fatal("a pipe was not made pollable")
	}
	ended := make(chan error, 1)
	go func() {
		_, err := f.Read(make([]byte, 8))
		ended <- err
	}()
	if err := f.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the blocked read ended with %v, want the deadline", err)
	}
	restore()
	var fl int
	rc, err := r.SyscallConn() // not r.Fd(), which would set blocking mode itself
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(fd uintptr) { fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if fl&unix.O_NONBLOCK != 0 {
		t.Error("the pipe is still in non-blocking mode after restore")
	}
	// A regular file is left as it is.
	reg, err := os.CreateTemp(t.TempDir(), "in")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if g, restore := Pollable(reg); g != reg {
		t.Error("a regular file was replaced")
	} else {
		restore()
	}
}
