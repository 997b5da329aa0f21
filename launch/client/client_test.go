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
