package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// Root failover (--replicas 3 or 5), agents' side. An agent of a
// replicated job survives its front-end: it ignores its session's end
// (stdin EOF), and a child of the root that loses its parent keeps its
// ranks and asks the replica agents, in turn, to adopt it; the one that
// leads the raft group after the front-end's death runs a successor root
// (successor.go) and adopts it. Meanwhile everything the agent sends up
// (its own messages and those it relays) waits in a bounded buffer, and
// once adopted it reports again what a new root needs: its ranks, their
// exits, its unanswered collective contributions.

// adoptWait bounds how long an orphaned child of the root looks for a new
// root before it kills its ranks and exits.
const adoptWait = 30 * time.Second

// maxPending bounds what an agent buffers for its parent while it has none.
const maxPending = 64 << 20

// uplink is an agent's way up: its parent link, or, between a lost parent
// and an adoption, a buffer.
type uplink struct {
	mu      sync.Mutex
	l       *link
	down    bool // no parent: buffer
	pending [][2][]byte
	size    int
}

// send writes a frame up, or buffers it while the agent has no parent. A
// failed write of an agent that may be adopted buffers the frame too.
func (u *uplink) send(typ uint8, p []byte, buffer bool) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.down {
		err := u.l.send(typ, p)
		if err == nil || !buffer {
			return err
		}
		u.down = true
	}
	if !buffer {
		return errors.New("no parent link")
	}
	if u.size+len(p) > maxPending {
		return fmt.Errorf("more than %d bytes wait for a new root", maxPending)
	}
	u.pending = append(u.pending, [2][]byte{{typ}, append([]byte(nil), p...)})
	u.size += len(p)
	return nil
}

// lose marks the parent gone: frames wait from now on.
func (u *uplink) lose() {
	u.mu.Lock()
	u.down = true
	u.mu.Unlock()
}

// attach takes a new parent link and sends what waited.
func (u *uplink) attach(l *link) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.l, u.down = l, false
	for _, f := range u.pending {
		if err := l.send(f[0][0], f[1]); err != nil {
			return err
		}
	}
	u.pending, u.size = nil, 0
	return nil
}

func encodePeers(ps []peerAddr) []byte {
	var e wire.Encoder
	e.Uint(uint64(len(ps)))
	for _, p := range ps {
		e.Uint(uint64(p.Idx)).String(p.Name).String(p.Addr)
	}
	return e.Data()
}

func decodePeers(p []byte) ([]peerAddr, error) {
	d := wire.NewDecoder(p)
	n := d.Count(3)
	ps := make([]peerAddr, 0, n)
	for range n {
		ps = append(ps, peerAddr{Idx: int(d.Uint()), Name: d.String(), Addr: d.String()})
	}
	return ps, d.Err()
}

// survives reports whether the agent outlives the loss of its parent: a
// child of the root in a replicated job.
func (a *Agent) survives() bool {
	return a.tree != nil && a.spec.Survive && a.spec.RootChild
}

// seekAdoption looks for the successor root among the replica agents until
// one adopts this agent or adoptWait passes.
func (a *Agent) seekAdoption(ctx context.Context) (*link, error) {
	deadline := time.Now().Add(adoptWait)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		peers := append([]peerAddr(nil), a.replicas...)
		a.mu.Unlock()
		for _, p := range peers {
			if l := a.askAdoption(ctx, p); l != nil {
				return l, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no root adopted node %s within %v", a.spec.Node, adoptWait)
}

// askAdoption asks one replica agent; it returns the new parent link if
// that agent runs the successor root.
func (a *Agent) askAdoption(ctx context.Context, p peerAddr) *link {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := secure.Dial(dctx, p.Addr, a.tree.creds, secure.WithPeerName(p.Name))
	if err != nil {
		return nil
	}
	if err := wire.WriteFrame(conn, mHello, hello{Idx: a.tree.idx, Adopt: true}.encode()); err != nil {
		conn.Close()
		return nil
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	f, err := wire.ReadFrame(conn, 1024)
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil || f.Type != mAdopted {
		conn.Close()
		return nil
	}
	return newLink(conn)
}

// resync reports again what a new root needs to know of this node: its
// children that are up, its ranks, their exits, and the collective
// contributions not yet answered.
func (a *Agent) resync() {
	if t := a.tree; t != nil {
		// Children first: a successor that does not know one is up (the
		// front-end died before it recorded it) sends it its share.
		t.mu.Lock()
		ups := make([]childUp, 0, len(t.ups))
		for _, u := range t.ups {
			ups = append(ups, u)
		}
		t.mu.Unlock()
		for _, u := range ups {
			a.send(mChildUp, u.encode())
		}
	}
	var st started
	for _, r := range a.order {
		st.Ranks = append(st.Ranks, r)
		st.Pids = append(st.Pids, a.ranks[r].cmd.Process.Pid)
	}
	if len(st.Ranks) > 0 {
		a.send(mStarted, st.encode())
	}
	a.mu.Lock()
	exits := make([]rankStatus, 0, len(a.exits))
	for _, s := range a.exits {
		exits = append(exits, s)
	}
	contribs := make([][]byte, 0, len(a.sentUp))
	for _, p := range a.sentUp {
		contribs = append(contribs, p)
	}
	a.mu.Unlock()
	// Output before exits, as always: a rank's exit follows its output.
	a.outQ.resend(a.send)
	for _, s := range exits {
		a.send(mExit, s.encode())
	}
	for _, p := range contribs {
		a.send(mContrib, p)
	}
}

// stdinGone is closed when an agent's session ended (its stdin reached
// EOF); an agent that does not survive its parent ends then.
func watchStdin() <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				close(gone)
				return
			}
		}
	}()
	return gone
}

// adoptConn is the successor root's side of an adoption request.
type adoptConn struct {
	conn  net.Conn
	hello hello
}
