package launch

import (
	"bytes"
	"net"
	"reflect"
	"strings"
	"testing"
)

// A relaunched agent's spec carries where its ranks and the recovery
// stand; one that does not match the node's ranks is refused.
func TestRelaunchSpec(t *testing.T) {
	rl := &relaunchSpec{Incarnation: 2, Incs: []uint64{1, 3}, Epoch: 4, CollEpoch: 3, Suspended: true, Version: 2,
		Table: [][]byte{[]byte("a0"), []byte("a1"), []byte("a2"), []byte("a3")}}
	s := &nodeSpec{JobID: "j", Argv: []string{"p"}, Size: 4, Ranks: []int{1, 3}, Relaunch: rl}
	got, err := decodeNodeSpec(s.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Relaunch, rl) {
		t.Fatalf("decoded %+v, want %+v", got.Relaunch, rl)
	}
	first := *s
	first.Relaunch = nil
	if got, err := decodeNodeSpec(first.encode()); err != nil || got.Relaunch != nil {
		t.Fatalf("a first agent's spec: %+v, %v", got, err)
	}
	bad := *s
	bad.Relaunch = &relaunchSpec{Incarnation: 2, Incs: []uint64{1}}
	if _, err := decodeNodeSpec(bad.encode()); err == nil || !strings.Contains(err.Error(), "a relaunch with 1 incarnations for 2 ranks") {
		t.Fatalf("a relaunch that does not match the ranks: %v", err)
	}
}

// The bootstrap gives an agent its incarnation, its hello says it, and a
// launcher hands a connection only to the start of that incarnation: an
// agent incarnation declared lost cannot take its successor's place.
func TestRelaunchIncarnationChecked(t *testing.T) {
	b := &bootstrap{Creds: []byte("c"), Port: 1, Idx: 3, Inc: 2}
	got, err := readBootstrap(bytes.NewReader(b.encode()))
	if err != nil || got.Inc != 2 {
		t.Fatalf("bootstrap: %+v, %v", got, err)
	}
	h, err := decodeHello(hello{Idx: 3, Inc: 2}.encode())
	if err != nil || h.Inc != 2 || h.Idx != 3 {
		t.Fatalf("hello: %+v, %v", h, err)
	}
	l := newLauncher(nil, nil, 0, nil, 0, nil)
	ch := l.expect("node3", 2)
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	if l.deliver("node3", acceptedConn{conn: c1, hello: hello{Idx: 3}}) {
		t.Fatal("the first incarnation's connection was taken for the second")
	}
	if !l.deliver("node3", acceptedConn{conn: c1, hello: hello{Idx: 3, Inc: 2}}) {
		t.Fatal("the second incarnation's connection was refused")
	}
	if ac := <-ch; ac.hello.Inc != 2 {
		t.Fatalf("delivered %+v", ac.hello)
	}
	if l.deliver("node3", acceptedConn{conn: c2, hello: hello{Idx: 3, Inc: 2}}) {
		t.Fatal("a second connection of one start was taken")
	}
	// A first start (incarnation 0 or 1 in the bootstrap) takes a hello
	// that says either.
	l.expect("node1", 0)
	if !l.deliver("node1", acceptedConn{conn: c2, hello: hello{Idx: 1, Inc: 1}}) {
		t.Fatal("a first agent was refused")
	}
}
