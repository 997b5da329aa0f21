package launcher

import (
	"errors"
	"io"
	"net"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// answer runs one answer to an adoption request from incarnation inc and
// returns the frame the asking agent reads (nil: the connection closed
// without one).
func answer(t *testing.T, inc uint64, do func(AdoptRequest)) *wire.Frame {
	t.Helper()
	root, agent := net.Pipe()
	defer agent.Close()
	done := make(chan struct{})
	go func() { // joined below
		defer close(done)
		do(AdoptRequest{Conn: root, Hello: proto.Hello{Idx: 3, Adopt: true, Inc: inc}})
	}()
	f, err := wire.ReadFrame(agent, 1024)
	if err != nil {
		<-done
		if !errors.Is(err, io.EOF) {
			t.Fatalf("read the answer: %v", err)
		}
		return nil
	}
	<-done
	return &f
}

// TestAdoptRequestAnswers: an accepted agent reads MAdopted; a refused
// one a closed connection, and a fenced one MFenced with its incarnation
// first.
func TestAdoptRequestAnswers(t *testing.T) {
	f := answer(t, 2, func(r AdoptRequest) {
		l, err := r.Accept()
		if err != nil || l == nil {
			t.Errorf("Accept: %v", err)
		}
		r.Conn.Close()
	})
	if f == nil || f.Type != proto.MAdopted {
		t.Fatalf("accepted: read %+v, want MAdopted", f)
	}
	if f := answer(t, 2, func(r AdoptRequest) { r.Refuse(false) }); f != nil {
		t.Fatalf("refused: read %+v, want the connection closed", f)
	}
	f = answer(t, 0, func(r AdoptRequest) { r.Refuse(true) })
	if f == nil || f.Type != proto.MFenced {
		t.Fatalf("fenced: read %+v, want MFenced", f)
	}
	if inc, err := proto.DecodeInt(f.Payload); err != nil || inc != 1 {
		t.Fatalf("fenced: incarnation %d (%v), want 1", inc, err)
	}
}
