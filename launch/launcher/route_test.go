package launcher

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// wireBuf is a link's connection that keeps what is written.
type wireBuf struct{ bytes.Buffer }

func (*wireBuf) Close() error { return nil }

// sent is a frame as it arrived, a routed one unwrapped (to: the agent
// it is for; -1: not routed).
type sent struct {
	to  int
	typ uint8
	p   string
}

// frames reads back what was sent on b.
func frames(t *testing.T, b *wireBuf) (out []sent) {
	t.Helper()
	r := wire.NewReader(b, 0)
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		to, typ, p := -1, f.Type, f.Payload
		if f.Type == proto.MRoute {
			if to, typ, p, err = proto.Unwrap(f.Payload, true); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, sent{to, typ, string(p)})
	}
}

// TestRoute: a message goes as it is on the agent's own link and routed
// on its top ancestor's; none goes to an agent not connected; what is sent
// while a move awaits its commit is held, through a commit of an earlier
// change, and goes in order on Flush once its own is committed.
func TestRoute(t *testing.T) {
	var ownBuf, topBuf wireBuf
	own, top := proto.NewLink(&ownBuf), proto.NewLink(&topBuf)
	var r Route
	if err := r.Send(nil, nil, 3, proto.MSpec, nil); err == nil {
		t.Error("sent to an agent not connected")
	}
	if err := r.Send(own, own, 3, proto.MSpec, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if got := frames(t, &ownBuf); len(got) != 1 || got[0].to != -1 || got[0].typ != proto.MSpec || got[0].p != "a" {
		t.Errorf("on its own link: %+v", got)
	}
	r.Await(5)
	for _, p := range []string{"b", "c"} {
		if err := r.Send(top, own, 3, proto.MBackup, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	r.Commit(4) // an earlier change's
	r.Flush(top, own, 3)
	if topBuf.Len() != 0 {
		t.Fatalf("sent before its move was committed: %+v", frames(t, &topBuf))
	}
	r.Commit(5)
	r.Flush(top, own, 3)
	got := frames(t, &topBuf)
	if len(got) != 2 || got[0].to != 3 || got[0].p != "b" || got[1].to != 3 || got[1].typ != proto.MBackup || got[1].p != "c" {
		t.Errorf("held, then routed to agent 3 in order: %+v", got)
	}
	r.Flush(top, own, 3)
	if topBuf.Len() != 0 {
		t.Error("flushed twice")
	}
}

// bcasts reads back the broadcasts sent on b, as the type and payload
// each carries (to: -1, or the agent a routed one is for).
func bcasts(t *testing.T, b *wireBuf) (out []sent) {
	t.Helper()
	for _, f := range frames(t, b) {
		if f.typ != proto.MBcast {
			t.Fatalf("not a broadcast: %+v", f)
		}
		_, typ, p, err := proto.Unwrap([]byte(f.p), false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sent{f.to, typ, string(p)})
	}
	return out
}

// TestBcast: a broadcast goes at once to each child of the root whose
// route holds nothing, and to one whose move awaits its commit after what
// was held for it, once the move is committed; the bytes counted are
// those of every child's copy.
func TestBcast(t *testing.T) {
	var freeBuf, heldBuf wireBuf
	free, held := proto.NewLink(&freeBuf), proto.NewLink(&heldBuf)
	var freeRoute, heldRoute Route
	heldRoute.Await(2)
	if err := heldRoute.Send(held, held, 1, proto.MCollResult, []byte("answer")); err != nil {
		t.Fatal(err)
	}
	n := Bcast([]Child{{Idx: 0, Link: free, Route: &freeRoute}, {Idx: 1, Link: held, Route: &heldRoute}}, proto.MSuspend, []byte("s"))
	if want := 2 * int64(len(proto.Wrap(-1, proto.MSuspend, []byte("s")))); n != want {
		t.Errorf("Bcast counted %d bytes, want %d", n, want)
	}
	if got := bcasts(t, &freeBuf); len(got) != 1 || got[0].typ != proto.MSuspend || got[0].p != "s" {
		t.Errorf("to the child that holds nothing: %+v", got)
	}
	if heldBuf.Len() != 0 {
		t.Fatalf("sent to a child whose move is not committed: %+v", frames(t, &heldBuf))
	}
	heldRoute.Commit(2)
	heldRoute.Flush(held, held, 1)
	got := frames(t, &heldBuf)
	if len(got) != 2 || got[0].typ != proto.MCollResult || got[1].typ != proto.MBcast {
		t.Fatalf("to the held child after its commit: %+v, want the answer, then the broadcast", got)
	}
	if _, typ, p, err := proto.Unwrap([]byte(got[1].p), false); err != nil || typ != proto.MSuspend || string(p) != "s" {
		t.Errorf("the held broadcast: %d %q %v", typ, p, err)
	}
}
