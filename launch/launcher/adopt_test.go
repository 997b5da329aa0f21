package launcher

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
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

// peerConn is a connection whose TLS peer's certificate names name.
type peerConn struct {
	net.Conn
	name string
}

func (c peerConn) ConnectionState() tls.ConnectionState {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: c.name}}
	return tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{cert}}
}

// TestAdoptRequestFrom: which agent a request for adoption comes from:
// its node's certificate names the agent's current node, or the
// incarnation asking is older than the current one (a lost incarnation,
// perhaps on the node the agent ran on before a spare took it over),
// which the planner can only fence.
func TestAdoptRequestFrom(t *testing.T) {
	for _, tc := range []struct {
		name     string
		node     string // the agent's, as the root knows it
		agentInc uint64
		peer     string // "": a connection without a certificate
		inc      uint64 // the incarnation asking
		want     bool
	}{
		{"the agent on its node", "node0", 1, "node0", 1, true},
		{"the current incarnation on the spare", "node7", 2, "node7", 2, true},
		{"the lost incarnation on the node it left", "node7", 2, "node6", 1, true},
		{"a first incarnation that says none", "node7", 2, "node6", 0, true},
		{"a newer incarnation on another node", "node7", 2, "node6", 3, false},
		{"the current incarnation on another node", "node0", 1, "node5", 1, false},
		{"no certificate name", "node7", 2, "", 1, false},
	} {
		var conn net.Conn = peerConn{name: tc.peer}
		if tc.peer == "" {
			conn = nil
		}
		r := AdoptRequest{Conn: conn, Hello: proto.Hello{Idx: 1, Adopt: true, Inc: tc.inc}}
		if got := r.From(tc.node, tc.agentInc); got != tc.want {
			t.Errorf("%s: From = %v, want %v", tc.name, got, tc.want)
		}
	}
}
