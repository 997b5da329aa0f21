package output

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

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
