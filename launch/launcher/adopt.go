package launcher

import (
	"fmt"
	"net"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// AdoptRequest is an agent's request for adoption as AcceptLoop took it
// (its hello has Adopt): a child of a lost root asking a successor, or an
// orphan whose last fallback parent is the root. The root that runs here
// decides (recovery's AdoptAsked) and answers with Accept or Refuse; an
// agent that runs no root refuses. The asking side is launch/agent's
// failover (askAdoption).
type AdoptRequest struct {
	Conn  net.Conn
	Hello proto.Hello
}

// Incarnation is the incarnation of the agent asking (at least 1).
func (r AdoptRequest) Incarnation() uint64 { return max(r.Hello.Inc, 1) }

// Accept tells the agent it is adopted (MAdopted) and returns the
// connection as the adopting root's link to it; if the answer cannot be
// written, the connection is closed.
func (r AdoptRequest) Accept() (*proto.Link, error) {
	if err := wire.WriteFrame(r.Conn, proto.MAdopted, nil); err != nil {
		r.Conn.Close()
		return nil, fmt.Errorf("answer an adoption request: %w", err)
	}
	return proto.NewLink(r.Conn), nil
}

// Refuse closes the request; fenced: the incarnation asking was declared
// lost, and first learns so (MFenced), and kills its ranks (launch/fence).
func (r AdoptRequest) Refuse(fenced bool) {
	if fenced {
		_ = r.Conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_ = wire.WriteFrame(r.Conn, proto.MFenced, proto.EncodeInt(int64(r.Incarnation())))
	}
	r.Conn.Close()
}
