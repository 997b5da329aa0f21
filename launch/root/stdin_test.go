package root

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/output"
)

// stdinFrontend is a front-end with only what its stdin reader uses:
// stdin is r.
func stdinFrontend(r *os.File) *frontend {
	fe := &frontend{events: make(chan event, 8), opts: Options{Stdin: r}}
	fe.input = output.NewStdin(r)
	return fe
}

// chunk waits for the reader's next chunk posted to the loop.
func chunk(t *testing.T, fe *frontend) output.Chunk {
	t.Helper()
	select {
	case ev := <-fe.events:
		return ev.(evStdin).c
	case <-time.After(10 * time.Second):
		t.Fatal("no chunk of stdin posted to the loop")
		return output.Chunk{}
	}
}

// TestStdinReaderJoined: the front-end's stdin reader ends with the loop
// (its stop): blocked in a read of a pipe through Go's poller, it is
// interrupted and joined, and the pipe reads again after; the read of a
// descriptor in blocking mode, which nothing interrupts, does not hold
// stop, and the reader ends with that read.
func TestStdinReaderJoined(t *testing.T) {
	r, w, err := os.Pipe() // read through the poller
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fe := stdinFrontend(r)
	stop, done := fe.readStdin(context.Background())
	if _, err := w.Write([]byte("in")); err != nil {
		t.Fatal(err)
	}
	if c := chunk(t, fe); string(c.Data) != "in" {
		t.Fatalf("chunk %+v, want \"in\"", c)
	}
	stop() // the reader waits in its next read
	select {
	case <-done:
	default:
		t.Fatal("stop returned while the reader of a pipe still ran")
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(make([]byte, 4)); n != 1 || err != nil {
		t.Fatalf("stdin after the reader's end: read %d, %v (its deadline left behind)", n, err)
	}

	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	br, bw := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w") // blocking mode
	defer br.Close()
	defer bw.Close()
	fe = stdinFrontend(br)
	stop, done = fe.readStdin(context.Background())
	stop()
	select {
	case <-done:
		t.Fatal("the reader of a descriptor in blocking mode ended with no input")
	default:
	}
	if _, err := bw.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not end after its read")
	}
}
