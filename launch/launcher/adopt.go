package launcher

import (
	"fmt"
	"net"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
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

// Name is the node the asking agent's certificate names ("": none).
func (r AdoptRequest) Name() string {
	name, _ := secure.PeerName(r.Conn)
	return name
}

// From reports whether the request comes from the agent Hello.Idx as the
// root knows it, on node as incarnation inc: the agent on its node (Name,
// the peer's certificate), or an older incarnation of it on any node of
// the job. An agent started again on a spare node has another name, and
// its lost incarnation, back from a partition, must still learn that it
// was fenced (chaos-spare seed 16243476037500135233: node006's
// incarnation 1, refused as unknown while node007 ran incarnation 2,
// sought a root until the job ended). An older incarnation is never
// adopted (the planner refuses it), so taking one for the agent can only
// fence it.
func (r AdoptRequest) From(node string, inc uint64) bool {
	name := r.Name()
	return name != "" && (node == name || r.Incarnation() < max(inc, 1))
}

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
