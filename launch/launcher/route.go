package launcher

import (
	"errors"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// Route is how the root sends one agent its messages: on via, the link
// it is reached through, its own (a child of the root's) or its top
// ancestor's, which routes them (proto.MRoute); while the tree change
// that moved it is not committed (Await) what the root sends it is held,
// and goes once the change is told (Commit, Flush), so that no agent acts
// on a change before the state log has it.
type Route struct {
	awaits uint64 // the change awaited (0: none)
	held   []heldMsg
}

// heldMsg is a message held until a move is committed.
type heldMsg struct {
	typ uint8
	p   []byte
}

// Await holds what is sent from now until change seq is committed.
func (r *Route) Await(seq uint64) { r.awaits = seq }

// Holding reports whether what is sent now is held (a move not committed
// yet): a broadcast, too, must then go after what waits.
func (r *Route) Holding() bool { return r.awaits != 0 }

// Commit ends the wait for a change up to seq, committed now: what was
// held goes with Flush.
func (r *Route) Commit(seq uint64) {
	if r.Holding() && r.awaits <= seq {
		r.awaits = 0
	}
}

// Send sends a message for agent to (via is its own link when own is):
// now, or once its move is committed.
func (r *Route) Send(via, own *proto.Link, to int, typ uint8, p []byte) error {
	if via == nil {
		return errors.New("agent not connected")
	}
	if r.Holding() {
		r.held = append(r.held, heldMsg{typ, p})
		return nil
	}
	return write(via, own, to, typ, p)
}

// Flush sends what was held for agent to while its move was committed,
// in order, once it is.
func (r *Route) Flush(via, own *proto.Link, to int) {
	if r.Holding() {
		return
	}
	held := r.held
	r.held = nil
	for _, m := range held {
		_ = write(via, own, to, m.typ, m.p)
	}
}

// write writes a message for agent to on via: as it is on its own link,
// routed on another's.
func write(via, own *proto.Link, to int, typ uint8, p []byte) error {
	if via == own {
		return via.Send(typ, p)
	}
	return via.Send(proto.MRoute, proto.Wrap(to, typ, p))
}

// Child is one of the root's children a broadcast goes to: its link and
// its route (idx: its index among the agents).
type Child struct {
	Idx   int
	Link  *proto.Link
	Route *Route
}

// Bcast sends a message to every agent through the root's children, each
// of which forwards it to its subtree, and returns the bytes sent. To a
// child whose move is not committed yet it is held after what waits (the
// answers it missed): a Suspend that went first would have it abandon a
// collective whose answer is on its way to it.
func Bcast(children []Child, typ uint8, p []byte) int64 {
	w := proto.Wrap(-1, typ, p)
	ls := make([]*proto.Link, 0, len(children))
	for _, c := range children {
		if c.Route.Holding() {
			_ = c.Route.Send(c.Link, c.Link, c.Idx, proto.MBcast, w)
			continue
		}
		ls = append(ls, c.Link)
	}
	proto.SendEach(ls, proto.MBcast, w)
	return int64(len(children) * len(w))
}
