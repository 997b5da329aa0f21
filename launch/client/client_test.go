package client

import (
	"errors"
	"net"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// fakeAgent answers one scripted reply per request and records the
// requests' types.
func fakeAgent(t *testing.T, conn net.Conn, replies []wire.Frame) <-chan []uint8 {
	got := make(chan []uint8, 1)
	go func() {
		defer conn.Close()
		r := wire.NewReader(conn, rankproto.MaxFrame)
		var types []uint8
		for _, rep := range replies {
			f, err := r.Next()
			if err != nil {
				break
			}
			types = append(types, f.Type)
			if err := wire.WriteFrame(conn, rep.Type, rep.Payload); err != nil {
				break
			}
		}
		got <- types
	}()
	return got
}

func TestClientAgainstScriptedAgent(t *testing.T) {
	a, b := net.Pipe()
	info := rankproto.Info{Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, Node: "n", JobID: "ft-1"}
	table := rankproto.EncodeValues([][]byte{[]byte("a0"), []byte("a1")})
	got := fakeAgent(t, b, []wire.Frame{
		{Type: rankproto.TInitOK, Payload: info.Encode()},
		{Type: rankproto.TValues, Payload: table},
		{Type: rankproto.TOK},
		{Type: rankproto.TGetOK, Payload: rankproto.EncodeGetOK(false, nil)},
		{Type: rankproto.TRingOK, Payload: rankproto.EncodeValues([][]byte{[]byte("l"), []byte("r")})},
		{Type: rankproto.TError, Payload: []byte("nope")},
	})
	c, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 1 || c.Size() != 2 || c.JobID() != "ft-1" {
		t.Fatalf("info %+v", c.Info())
	}
	nt, err := c.Publish([]byte("a1"))
	if err != nil || len(nt) != 2 || string(c.NodeTable()[0]) != "a0" {
		t.Fatalf("publish: %q %v", nt, err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a missing key: %v", err)
	}
	if l, r, err := c.Ring([]byte("x")); err != nil || string(l) != "l" || string(r) != "r" {
		t.Fatalf("ring: %q %q %v", l, r, err)
	}
	if err := c.Fence(); err == nil {
		t.Fatal("an Error reply was not returned as an error")
	}
	c.Close()
	types := <-got
	want := []uint8{rankproto.TInit, rankproto.TPublish, rankproto.TBarrier, rankproto.TGet, rankproto.TRing, rankproto.TFence}
	if string(types) != string(want) {
		t.Fatalf("requests %v, want %v", types, want)
	}
}

func TestClientRejectsWrongReply(t *testing.T) {
	a, b := net.Pipe()
	fakeAgent(t, b, []wire.Frame{{Type: rankproto.TOK}})
	if _, err := New(a); err == nil {
		t.Fatal("an OK reply to Init was accepted")
	}
}

func TestInitWithoutLauncher(t *testing.T) {
	t.Setenv("FTLAUNCH_FD", "")
	if _, err := Init(); !errors.Is(err, ErrNotLaunched) {
		t.Fatalf("Init outside ftlaunch: %v", err)
	}
	t.Setenv("FTLAUNCH_FD", "x")
	if _, err := Init(); err == nil {
		t.Fatal("FTLAUNCH_FD=x accepted")
	}
}

// TestRecoveryEvents: the agent interleaves recovery events with replies;
// the client delivers them in order, applies the patch to its node table
// and acknowledges it, and an interrupted collective says ErrRecovering.
func TestRecoveryEvents(t *testing.T) {
	a, b := net.Pipe()
	acks := make(chan [2]uint64, 4)
	suspended := make(chan struct{})
	go func() {
		defer b.Close()
		// The agent reads while it writes (a pipe has no buffer); it
		// takes acknowledgements as they come.
		frames := make(chan wire.Frame, 16)
		go func() {
			defer close(frames)
			r := wire.NewReader(b, rankproto.MaxFrame)
			for {
				f, err := r.Next()
				if err != nil {
					return
				}
				if f.Type == rankproto.TAck {
					typ, ep, err := rankproto.DecodeAck(f.Payload)
					if err != nil {
						t.Errorf("ack: %v", err)
					}
					acks <- [2]uint64{uint64(typ), ep}
					if typ == rankproto.TSuspend {
						close(suspended)
					}
					continue
				}
				frames <- f
			}
		}()
		send := func(typ uint8, p []byte) { _ = wire.WriteFrame(b, typ, p) }
		next := func() wire.Frame { return <-frames }
		next() // init
		send(rankproto.TInitOK, rankproto.Info{Rank: 0, Size: 2, Incarnation: 2}.Encode())
		next() // publish
		send(rankproto.TValues, rankproto.EncodeValues([][]byte{[]byte("a0"), []byte("a1")}))
		next() // barrier, interrupted by a recovery
		send(rankproto.TSuspend, rankproto.EncodeEvent(rankproto.Event{Epoch: 3}))
		send(rankproto.TRecovering, nil)
		<-suspended // as an agent does: the patch after every rank suspended
		send(rankproto.TPatch, rankproto.EncodeEvent(rankproto.Event{Epoch: 3, Version: 2, Rows: []rankproto.Row{{Rank: 1, Incarnation: 2, ITuple: []byte("b1")}}}))
		send(rankproto.TResume, rankproto.EncodeEvent(rankproto.Event{Epoch: 3, Version: 2}))
		next() // the barrier again
		send(rankproto.TOK, nil)
		next() // until the client closes
	}()
	c, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	events := c.Events()
	if c.Incarnation() != 2 {
		t.Fatalf("incarnation %d", c.Incarnation())
	}
	if _, err := c.Publish([]byte("a0")); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); !errors.Is(err, ErrRecovering) {
		t.Fatalf("barrier during a recovery: %v", err)
	}
	ev := <-events
	if ev.Type != Suspend || ev.Epoch != 3 {
		t.Fatalf("first event %+v", ev)
	}
	if err := c.Ack(ev); err != nil {
		t.Fatal(err)
	}
	if got := <-acks; got != [2]uint64{uint64(Suspend), 3} {
		t.Fatalf("ack %v", got)
	}
	ev = <-events
	if ev.Type != Patch || ev.Version != 2 || string(c.NodeTable()[1]) != "b1" || string(c.NodeTable()[0]) != "a0" {
		t.Fatalf("patch %+v, table %q", ev, c.NodeTable())
	}
	if got := <-acks; got != [2]uint64{uint64(Patch), 3} {
		t.Fatalf("patch ack %v", got)
	}
	if ev = <-events; ev.Type != Resume {
		t.Fatalf("third event %+v", ev)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-events; ok {
		t.Fatal("events not closed")
	}
}

func TestEventCodecs(t *testing.T) {
	ev := rankproto.Event{Type: rankproto.TPatch, Epoch: 9, Version: 4, Rows: []rankproto.Row{{Rank: 3, Incarnation: 2, ITuple: []byte("x")}}}
	got, err := rankproto.DecodeEvent(rankproto.TPatch, rankproto.EncodeEvent(ev))
	if err != nil || got.Epoch != 9 || got.Version != 4 || len(got.Rows) != 1 || string(got.Rows[0].ITuple) != "x" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := rankproto.DecodeEvent(rankproto.TOK, nil); err == nil {
		t.Fatal("a reply decoded as an event")
	}
	if _, _, err := rankproto.DecodeAck(rankproto.EncodeAck(rankproto.TOK, 1)); err == nil {
		t.Fatal("an ack of a reply")
	}
}

// TestInfoFromAnOlderAgent: an Init reply without the fields appended
// later (incarnation, restarts) decodes, as incarnation 1.
func TestInfoFromAnOlderAgent(t *testing.T) {
	var e wire.Encoder
	e.Uint(1).Uint(2).Uint(1).Uint(2).String("n").Uint(0).String("ft-1")
	i, err := rankproto.DecodeInfo(e.Data())
	if err != nil || i.Rank != 1 || i.JobID != "ft-1" || i.Incarnation != 1 || i.Restarts != 0 {
		t.Fatalf("%+v %v", i, err)
	}
}
