package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// Backup parents in action (docs/recovery.md, "Losing an
// agent"). Every agent below a child of the root holds a standby link to
// its backup parent, heartbeated like any link. Under a restart policy, an
// agent whose parent link ends (EOF, reset, the heartbeat's timeout, or
// the root's word through the backup: MSwitch) moves its upward traffic to
// that link at once, on its own: it asks the backup to take it (MAdoptMe,
// with its incarnation and the agents below it), and buffers what it sends
// meanwhile. The backup refuses an agent that is its own ancestor, or
// while it has lost its own parent; otherwise it takes the link as a
// child's and reports the new edge up (MReparented). The root commits the
// edge, tells the new ancestors their routes (MRoutes) and asks the moved
// agents to report again what the lost parent may have swallowed (their
// ranks, exits, unanswered contributions, unacknowledged output): every
// one of those is numbered or keyed, so the root takes each once.

// adoptAnswerWait bounds how long an orphan waits for its backup parent's
// answer.
const adoptAnswerWait = 5 * time.Second

// fallbackDial bounds the connection to a fallback parent: it is tried
// only once the parent and the backup are lost, when waiting is what the
// ranks pay for.
const fallbackDial = 2 * time.Second

// standbyLink is this agent's link to its backup parent: heartbeats only
// until the agent switches to it; then it is the agent's parent link.
type standbyLink struct {
	l      *proto.Link
	parent proto.PeerAddr
	cancel context.CancelFunc
	answer chan error    // the backup's answer to MAdoptMe (nil: taken)
	ended  chan struct{} // closed when the link's reader returned
	err    error         // why it returned (once ended)

	mu       sync.Mutex
	switched bool // the backup took this agent: frames are the parent's
}

// wait waits for the end of a standby link that became the parent link,
// or for ctx (the agent ended its link after a shutdown).
func (sb *standbyLink) wait(ctx context.Context) error {
	select {
	case <-sb.ended:
	case <-ctx.Done():
		sb.cancel()
		<-sb.ended
	}
	return sb.err
}

// canSwitch reports whether this agent moves to its backup parent when
// its parent is lost: it is below a child of the root, in a job that
// recovers from a lost agent.
func (a *Agent) canSwitch() bool {
	return a.tree != nil && a.spec != nil && !a.isRootChild() && a.spec.Restart != "" && a.spec.Restart != "none"
}

// isRootChild reports whether this agent's parent is the root: from its
// start, or since the root adopted it (switchToFallback).
func (a *Agent) isRootChild() bool {
	return a.spec != nil && (a.spec.RootChild || a.par.rootChild.Load())
}

// buffersUp reports whether frames for a lost parent wait for the next
// one (a root failover, or a switch to the backup parent).
func (a *Agent) buffersUp() bool {
	return a.spec != nil && (a.survives() || a.canSwitch())
}

// connectBackup opens the standby link to this agent's backup parent and
// tells the front-end.
func (a *Agent) connectBackup(ctx context.Context, wg *sync.WaitGroup, p proto.PeerAddr) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		sb, err := a.openStandby(ctx, wg, p, proto.ConnectTimeout)
		if err != nil {
			if ctx.Err() == nil {
				a.logf("no standby link to backup parent %s: %v", p.Name, err)
			}
			return
		}
		a.mu.Lock()
		old := a.par.backup
		a.par.backup = sb
		a.mu.Unlock()
		if old != nil && !old.isSwitched() {
			old.cancel() // a new backup parent replaces the old one
		}
		a.send(proto.MBackupUp, proto.EncodeInt(int64(p.Idx)))
	}()
}

// openStandby dials agent p and opens a standby link to it: heartbeats
// only until this agent asks p to adopt it (switchVia).
func (a *Agent) openStandby(ctx context.Context, wg *sync.WaitGroup, p proto.PeerAddr, timeout time.Duration) (*standbyLink, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	conn, err := secure.Dial(dctx, p.Addr, a.tree.creds, secure.WithPeerName(p.Name))
	cancel()
	if err != nil {
		return nil, err
	}
	l := proto.NewLink(conn)
	if err := l.Send(proto.MHello, proto.Hello{Idx: a.tree.idx, Backup: true, Inc: a.tree.inc}.Encode()); err != nil {
		conn.Close()
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	sb := &standbyLink{l: l, parent: p, cancel: stop, answer: make(chan error, 1), ended: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stop()
		hb := a.spec.Heartbeat
		sb.err = l.Run(sctx, proto.UplinkPing(hb), a.spec.Timing.LinkTimeout(hb), func(typ uint8, p []byte) error {
			if sb.isSwitched() {
				return a.handle(typ, p)
			}
			switch typ {
			case proto.MAdopted:
				sb.mu.Lock()
				sb.switched = true // what follows is the parent's
				sb.mu.Unlock()
				sb.tell(nil)
			case proto.MRefused:
				d := wire.NewDecoder(p)
				sb.tell(fmt.Errorf("%w: %s", errRefused, d.String()))
			case proto.MSwitch:
				return a.handle(typ, p)
			}
			return nil
		})
		close(sb.ended)
	}()
	return sb, nil
}

// tell passes the backup's answer on; an answer nobody asked for (or a
// second one) is dropped rather than block the link's reader.
func (sb *standbyLink) tell(err error) {
	select {
	case sb.answer <- err:
	default:
	}
}

func (sb *standbyLink) isSwitched() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.switched
}

// switchToBackup moves the agent's upward traffic to its backup parent
// after its parent link ended with cause. It returns the standby link,
// now the parent link.
func (a *Agent) switchToBackup(ctx context.Context, cause error) (*standbyLink, error) {
	a.mu.Lock()
	sb := a.par.backup
	a.mu.Unlock()
	if sb == nil {
		return nil, errors.New("no standby link to a backup parent")
	}
	select {
	case <-sb.ended:
		return nil, fmt.Errorf("the standby link to the backup parent %s ended too (%v)", sb.parent.Name, sb.err)
	default:
	}
	a.up.lose()
	a.logf("lost the parent link (%v): switching to the backup parent %s", cause, sb.parent.Name)
	// Under a replicated root the backup parent may be between roots
	// itself: a child of the root whose root (a successor) died with the
	// parent this agent lost, it refuses orphans until the next root
	// adopts it, a second or so later. It is asked again until
	// orphanRetry passed (the root waits longer for this agent: its
	// orphanWait).
	deadline := time.Now().Add(proto.LinkTimeout(a.spec.Heartbeat))
	for {
		err := a.switchVia(ctx, sb, "backup parent")
		if err == nil {
			break
		}
		if !errors.Is(err, errRefused) || !a.spec.Survive || !time.Now().Before(deadline) {
			return nil, err
		}
		select {
		case <-time.After(orphanRetry):
		case <-sb.ended:
			return nil, fmt.Errorf("the standby link to the backup parent %s ended (%v) after it refused this agent: %w", sb.parent.Name, sb.err, err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a.mu.Lock()
	if a.par.backup == sb {
		a.par.backup = nil
	}
	a.mu.Unlock()
	return sb, nil
}

// errRefused: the agent asked to adopt this one refused (it said why).
var errRefused = errors.New("refused")

// orphanRetry is how often an orphan of a replicated job asks a backup
// parent that refused it again.
const orphanRetry = 200 * time.Millisecond

// switchVia asks the agent at the other end of standby link sb (what
// says what it is to this agent) to adopt this agent, and once it did,
// sends what waited for a parent there.
func (a *Agent) switchVia(ctx context.Context, sb *standbyLink, what string) error {
	rp := proto.Reparent{Idx: a.tree.idx, Inc: a.incarnation(), Sub: a.tree.below()}
	if err := sb.l.Send(proto.MAdoptMe, rp.Encode()); err != nil {
		return fmt.Errorf("ask the %s %s to adopt node %s: %w", what, sb.parent.Name, a.spec.Node, err)
	}
	timer := time.NewTimer(adoptAnswerWait)
	defer timer.Stop()
	select {
	case err := <-sb.answer:
		if err != nil {
			return fmt.Errorf("the %s %s: %w", what, sb.parent.Name, err)
		}
	case <-sb.ended:
		return fmt.Errorf("the standby link to the %s %s ended (%v)", what, sb.parent.Name, sb.err)
	case <-timer.C:
		return fmt.Errorf("the %s %s did not answer within %v", what, sb.parent.Name, adoptAnswerWait)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := a.up.attach(sb.l); err != nil {
		return fmt.Errorf("the %s %s: %w", what, sb.parent.Name, err)
	}
	a.logf("node %s now reports to %s", a.spec.Node, sb.parent.Name)
	return nil
}

// switchToFallback tries, in order, the fallback parents beyond the
// backup the root gave this agent (MFallbacks: its grandparent, then the
// root) once its parent and its backup parent are both out of reach. It
// returns the new parent link: a standby link an agent took (sb), or a
// link the root took (l).
func (a *Agent) switchToFallback(ctx context.Context) (sb *standbyLink, l *proto.Link, err error) {
	a.mu.Lock()
	fbs := slices.Clone(a.par.fallbacks)
	a.mu.Unlock()
	if len(fbs) == 0 {
		return nil, nil, errors.New("no fallback parent")
	}
	a.up.lose()
	var errs []error
	for _, p := range fbs {
		if p.Idx < 0 {
			// The root: it takes this agent as its own child.
			a.logf("asking the root (%s) to adopt node %s", p.Addr, a.spec.Node)
			nl, err := a.askAdoption(ctx, proto.PeerAddr{Idx: -1, Name: p.Name, Addr: p.Addr})
			switch {
			case err != nil:
				return nil, nil, err // fenced: declared lost already
			case nl != nil:
				if err := a.up.attach(nl); err != nil {
					nl.Conn.Close()
					errs = append(errs, fmt.Errorf("the root: %w", err))
					continue
				}
				a.par.rootChild.Store(true)
				a.logf("node %s now reports to the root", a.spec.Node)
				return nil, nl, nil
			}
			errs = append(errs, fmt.Errorf("the root at %s did not adopt it", p.Addr))
			continue
		}
		s, err := a.openStandby(ctx, a.wg, p, fallbackDial)
		if err != nil {
			errs = append(errs, fmt.Errorf("the fallback parent %s: %w", p.Name, err))
			continue
		}
		a.logf("switching to the fallback parent %s", p.Name)
		if err := a.switchVia(ctx, s, "fallback parent"); err != nil {
			s.cancel()
			errs = append(errs, err)
			continue
		}
		return s, nil, nil
	}
	return nil, nil, errors.Join(errs...)
}

// switchNow ends the parent link at the root's word that the parent was
// declared lost (a silent parent: the link's own timeout comes later).
func (a *Agent) switchNow() {
	a.up.mu.Lock()
	l := a.up.l
	a.up.mu.Unlock()
	a.logf("the root declared the parent lost: switching to the backup parent")
	l.Conn.Close()
}

// below lists the agents below this one.
func (t *treeState) below() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.route))
}

// adoptStandby holds a standby link from a node whose backup parent this
// agent is: heartbeats only, until that node asks to be adopted; then it
// is a child's link.
func (a *Agent) adoptStandby(ctx context.Context, wg *sync.WaitGroup, conn net.Conn, h proto.Hello) {
	t := a.tree
	l := proto.NewLink(conn)
	idx := h.Idx
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		conn.Close()
		return
	}
	t.standby[idx] = l
	t.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		hb := a.spec.Heartbeat
		adopted, done := false, false
		err := l.Run(ctx, hb, a.spec.Timing.LinkTimeout(hb), func(typ uint8, p []byte) error {
			if adopted {
				return a.relayUp(idx, typ, p, &done)
			}
			if typ != proto.MAdoptMe {
				return nil
			}
			rp, err := proto.DecodeReparent(p)
			if err != nil || rp.Idx != idx {
				return fmt.Errorf("adoption request from agent %d: %v", idx, err)
			}
			if why := a.refuseAdoption(rp); why != "" {
				var e wire.Encoder
				e.String(why)
				_ = l.Send(proto.MRefused, e.Data())
				a.logf("refused to adopt %s: %s", linkPeer(l, idx), why)
				return nil
			}
			// The answer first, then the links: until the child reads
			// its answer it takes nothing else on this link, so a
			// broadcast relayed down before the answer was lost (a
			// terminate overtaking it left the job waiting for ever
			// for the child's ranks: make chaos, seed
			// 14391187593717090148). A broadcast before the child is
			// linked here is the root's to resend: it hears of the edge
			// below (moved), before anything the child sends through
			// this agent (relayed by this goroutine once this returns).
			_ = l.Send(proto.MAdopted, nil)
			t.mu.Lock()
			t.children[idx] = l
			t.route[idx] = idx
			for _, s := range rp.Sub {
				t.route[s] = idx
			}
			if t.standby[idx] == l {
				delete(t.standby, idx)
			}
			t.mu.Unlock()
			adopted = true
			a.send(proto.MReparented, rp.Encode())
			a.logf("took %s (incarnation %d, %d agent(s) below it) as a child: its parent was lost", linkPeer(l, idx), rp.Inc, len(rp.Sub))
			return nil
		})
		t.mu.Lock()
		if t.standby[idx] == l {
			delete(t.standby, idx)
		}
		t.mu.Unlock()
		if !adopted {
			return
		}
		a.childGone(idx, l, err)
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}()
}

// refuseAdoption says why this agent does not take an orphan ("": it
// does).
func (a *Agent) refuseAdoption(rp proto.Reparent) string {
	switch {
	case slices.Contains(rp.Sub, a.tree.idx):
		return "the backup parent is below the orphan"
	case a.stopped.Load() || a.ctx.Err() != nil:
		return "the backup parent is shutting down"
	}
	a.up.mu.Lock()
	down := a.up.down
	a.up.mu.Unlock()
	if down {
		return "the backup parent has lost its own parent"
	}
	a.tree.mu.Lock()
	closing := a.tree.closing
	a.tree.mu.Unlock()
	if closing {
		return "the backup parent is shutting down"
	}
	return ""
}

// relayUp passes a frame of child idx up: relayed frames as they are, the
// child's own wrapped with its index. done notes the child's MDone.
func (a *Agent) relayUp(idx int, typ uint8, p []byte, done *bool) error {
	if typ == proto.MFrom {
		a.notePassing(idx, p)
		return a.up.send(proto.MFrom, p, a.buffersUp())
	}
	*done = *done || typ == proto.MDone
	if typ == proto.MContrib && !a.combineChild(idx, p) {
		return nil // combined with this node's part (combine.go)
	}
	return a.up.send(proto.MFrom, proto.Wrap(idx, typ, p), a.buffersUp())
}

// switchChild passes the root's word that a standby child's parent was
// declared lost to that child.
func (a *Agent) switchChild(idx int) {
	if a.tree == nil {
		return
	}
	a.tree.mu.Lock()
	l := a.tree.standby[idx]
	a.tree.mu.Unlock()
	if l != nil {
		_ = l.Send(proto.MSwitch, proto.EncodeInt(-1))
	}
}

// addRoutes takes routes through a child, after a reparent below it.
func (a *Agent) addRoutes(r proto.Routes) {
	if a.tree == nil {
		return
	}
	a.tree.mu.Lock()
	for _, x := range r.Agents {
		a.tree.route[x] = r.Via
	}
	a.tree.mu.Unlock()
	a.rerouted(r.Via)
}
