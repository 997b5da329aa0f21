package agent

import (
	"net"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
)

// TestLinkPeer: the agent's lines name the node at the other end of a
// link from its certificate, and fall back to the tree index without TLS.
func TestLinkPeer(t *testing.T) {
	ca, err := secure.NewJobCA("job1")
	if err != nil {
		t.Fatal(err)
	}
	parent, err := ca.Issue("node1")
	if err != nil {
		t.Fatal(err)
	}
	child, err := ca.Issue("node7")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := secure.Listen(t.Context(), "tcp", "127.0.0.1:0", parent)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	cc, err := secure.Dial(t.Context(), ln.Addr().String(), child)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer sc.Close()
	if got := linkPeer(&proto.Link{Conn: sc}, 6); got != "node node7" {
		t.Errorf("over TLS: %q, want %q", got, "node node7")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := linkPeer(&proto.Link{Conn: a}, 6); got != "agent 6" {
		t.Errorf("without TLS: %q, want %q", got, "agent 6")
	}
}
