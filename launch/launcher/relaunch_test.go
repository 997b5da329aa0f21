package launcher

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// The bootstrap gives an agent its incarnation, its hello says it, and a
// launcher hands a connection only to the start of that incarnation: an
// agent incarnation declared lost cannot take its successor's place.
func TestRelaunchIncarnationChecked(t *testing.T) {
	b := &proto.Bootstrap{Creds: []byte("c"), Port: 1, Idx: 3, Inc: 2}
	got, err := proto.ReadBootstrap(bytes.NewReader(b.Encode()))
	if err != nil || got.Inc != 2 {
		t.Fatalf("bootstrap: %+v, %v", got, err)
	}
	h, err := proto.DecodeHello(proto.Hello{Idx: 3, Inc: 2}.Encode())
	if err != nil || h.Inc != 2 || h.Idx != 3 {
		t.Fatalf("hello: %+v, %v", h, err)
	}
	l := NewLauncher(nil, nil, 0, nil, 0, nil)
	ch := l.Expect("node3", 2)
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	if l.deliver("node3", acceptedConn{conn: c1, hello: proto.Hello{Idx: 3}}) {
		t.Fatal("the first incarnation's connection was taken for the second")
	}
	if !l.deliver("node3", acceptedConn{conn: c1, hello: proto.Hello{Idx: 3, Inc: 2}}) {
		t.Fatal("the second incarnation's connection was refused")
	}
	if ac := <-ch; ac.hello.Inc != 2 {
		t.Fatalf("delivered %+v", ac.hello)
	}
	if l.deliver("node3", acceptedConn{conn: c2, hello: proto.Hello{Idx: 3, Inc: 2}}) {
		t.Fatal("a second connection of one start was taken")
	}
	// A first start (incarnation 0 or 1 in the bootstrap) takes a hello
	// that says either.
	l.Expect("node1", 0)
	if !l.deliver("node1", acceptedConn{conn: c2, hello: proto.Hello{Idx: 1, Inc: 1}}) {
		t.Fatal("a first agent was refused")
	}
}

// TestRelauncherBinds: a successor's relauncher starts the children it is
// given with the context and hooks it was bound to.
func TestRelauncherBinds(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "successor")
	var got []proto.ChildSpec
	c := ResumeConfig{Relaunch: func(ctx context.Context, cs []proto.ChildSpec, h RelaunchHooks, report func(LaunchResult)) error {
		if ctx.Value(key{}) != "successor" || h.Go == nil {
			t.Errorf("context or hooks not the bound ones")
		}
		got = cs
		return nil
	}}
	if err := c.Relauncher(ctx, RelaunchHooks{Go: func(func()) {}})([]proto.ChildSpec{{Idx: 3}}, nil); err != nil || len(got) != 1 || got[0].Idx != 3 {
		t.Errorf("started %+v, %v", got, err)
	}
}
