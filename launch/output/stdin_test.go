package output

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// oneByte reads one byte per call, so that each chunk is one byte.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:1]) }

// TestStdinPaced: stdin is read no further than the unacknowledged
// window allows; each acknowledgement lets one more chunk through, and
// its end is posted once read.
func TestStdinPaced(t *testing.T) {
	s := NewStdin(oneByte{strings.NewReader("abcdef")})
	posted := make(chan Chunk)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		<-done
	}()
	go func() {
		defer close(done)
		s.Read(ctx, func(c Chunk) bool {
			select {
			case posted <- c:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	var got []string
	for range stdinWindow {
		got = append(got, string((<-posted).Data))
	}
	select {
	case c := <-posted:
		t.Fatalf("chunk %q read beyond the window of %d", c.Data, stdinWindow)
	default:
	}
	for range 2 {
		s.Acked()
		got = append(got, string((<-posted).Data))
	}
	s.Acked()
	if c := <-posted; !c.EOF {
		t.Errorf("after the last byte: %+v, want its end", c)
	}
	if strings.Join(got, "") != "abcdef" {
		t.Errorf("chunks %q", got)
	}
}

// TestStdinFlush: the chunks held go in order, the end as MStdinClose;
// a failed send drops the rest (the link is gone).
func TestStdinFlush(t *testing.T) {
	s := NewStdin(strings.NewReader(""))
	var sent []uint8
	s.Queue(Chunk{Data: []byte("a")})
	s.Queue(Chunk{EOF: true})
	s.Flush(func(typ uint8, _ []byte) error { sent = append(sent, typ); return nil })
	if len(sent) != 2 || sent[0] != proto.MStdin || sent[1] != proto.MStdinClose {
		t.Errorf("sent %v, want MStdin then MStdinClose", sent)
	}
	sent = nil
	s.Flush(func(typ uint8, _ []byte) error { sent = append(sent, typ); return nil })
	if len(sent) != 0 {
		t.Errorf("flushed again: %v", sent)
	}
	s.Queue(Chunk{Data: []byte("b")})
	s.Queue(Chunk{Data: []byte("c")})
	s.Flush(func(typ uint8, _ []byte) error { sent = append(sent, typ); return errors.New("link gone") })
	if len(sent) != 1 {
		t.Errorf("sends after a failed one: %v", sent)
	}
}

// startReader starts r's reader, whose chunks come on the channel it
// returns.
func startReader(r io.Reader) (chunks chan Chunk, stop func(), done <-chan struct{}) {
	chunks = make(chan Chunk, 8)
	stop, done = NewStdin(r).Start(context.Background(), func(ctx context.Context, c Chunk) bool {
		select {
		case chunks <- c:
			return true
		case <-ctx.Done():
			return false
		}
	})
	return chunks, stop, done
}

// TestStdinStartJoined: the reader ends with its stop: blocked in a read
// of a pipe through Go's poller, it is interrupted and joined, and the
// pipe reads again after; the read of a descriptor in blocking mode, which
// nothing interrupts, does not hold stop, and the reader ends with that
// read.
func TestStdinStartJoined(t *testing.T) {
	r, w, err := os.Pipe() // read through the poller
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	chunks, stop, done := startReader(r)
	if _, err := w.Write([]byte("in")); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-chunks:
		if string(c.Data) != "in" {
			t.Fatalf("chunk %+v, want \"in\"", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no chunk of stdin posted")
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
	_, stop, done = startReader(br)
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
