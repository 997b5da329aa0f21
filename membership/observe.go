package membership

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// peerInfo is what an observer remembers about a peer between events.
type peerInfo struct {
	meta nodeMeta
	addr string
	gone bool // reported dead or left, and not alive since
}

// observer turns what memberlist tells one member into evidence. memberlist
// reaches it three ways, none of which may block:
//   - as EventDelegate (join, update, leave), called with memberlist's node
//     lock held and never concurrently;
//   - as PingDelegate, when this member's direct probe of a peer is acked;
//   - through logTap, when this member's own probe of a peer failed and it
//     starts suspecting it. memberlist has no event for suspicion; its log
//     line "Suspect <name> has failed, no acks received" is the only signal,
//     and TestCrash* tests fail if it ever changes.
//
// Every method takes mu, pushes onto the queue and returns; none calls back
// into memberlist.
type observer struct {
	self string
	q    *queue

	mu        sync.Mutex
	peers     map[string]peerInfo // last metadata and address per peer
	suspected map[string]bool     // peers this member's own probes suspect
	leaving   map[string]uint64   // peers that sent a leave notice, by incarnation
	lastAck   time.Time           // when a probe of this member's was last acked
}

// maxLeaving bounds the leave notices remembered at once.
const maxLeaving = 4096

func (o *observer) learn(n *memberlist.Node) peerInfo {
	meta, _ := decodeMeta(n.Meta) // unreadable metadata: incarnation 0
	p := peerInfo{meta: meta, addr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))}
	o.peers[n.Name] = p
	return p
}

func (o *observer) push(name string, p peerInfo, k Kind) {
	o.q.push(Evidence{
		Node:        name,
		Incarnation: p.meta.Incarnation,
		Role:        p.meta.Role,
		Addr:        p.addr,
		Kind:        k,
		Time:        time.Now(),
		Observer:    o.self,
	})
}

// NotifyJoin implements memberlist.EventDelegate.
func (o *observer) NotifyJoin(n *memberlist.Node) { o.alive(n) }

// NotifyUpdate implements memberlist.EventDelegate. It fires when a peer's
// metadata changed: it booted again under a new incarnation, or announced
// that it is leaving.
func (o *observer) NotifyUpdate(n *memberlist.Node) { o.alive(n) }

func (o *observer) alive(n *memberlist.Node) {
	if n.Name == o.self {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.learn(n)
	delete(o.suspected, n.Name)
	if p.meta.Leaving {
		o.push(n.Name, p, KindLeft)
		return
	}
	if inc, ok := o.leaving[n.Name]; ok && inc != p.meta.Incarnation {
		delete(o.leaving, n.Name) // booted again since its notice
	}
	o.push(n.Name, p, KindAlive)
}

// NotifyLeave implements memberlist.EventDelegate: the peer is dead or has
// left. memberlist does not say which; the peer's gossiped leaving flag or
// its direct leave notice does.
func (o *observer) NotifyLeave(n *memberlist.Node) {
	if n.Name == o.self {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.learn(n)
	delete(o.suspected, n.Name)
	inc, noticed := o.leaving[n.Name]
	delete(o.leaving, n.Name)
	p.gone = true
	o.peers[n.Name] = p
	if p.meta.Leaving || (noticed && inc == p.meta.Incarnation) {
		o.push(n.Name, p, KindLeft)
		return
	}
	o.push(n.Name, p, KindDead)
}

// leaveNotice handles a peer's direct leave notice: evidence that it is
// leaving, remembered so that its coming NotifyLeave is reported as left.
func (o *observer) leaveNotice(b []byte) {
	name, meta, err := decodeLeaveNotice(b)
	if err != nil || !meta.Leaving || name == o.self {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.leaving[name]; !ok && len(o.leaving) >= maxLeaving {
		return
	}
	o.leaving[name] = meta.Incarnation
	p := o.peers[name]
	p.meta = meta
	o.push(name, p, KindLeft)
}

// AckPayload implements memberlist.PingDelegate; acks carry nothing.
func (o *observer) AckPayload() []byte { return nil }

// NotifyPingComplete implements memberlist.PingDelegate: a direct probe of
// other was acked. If this member suspected it, that is evidence it is alive.
func (o *observer) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastAck = time.Now()
	if !o.suspected[other.Name] {
		return
	}
	delete(o.suspected, other.Name)
	p, ok := o.peers[other.Name]
	if !ok {
		p = o.learn(other)
	}
	o.push(other.Name, p, KindAlive)
}

// suspect records that this member's own probe of name failed.
func (o *observer) suspect(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, ok := o.peers[name]
	if !ok || p.gone || o.suspected[name] {
		return // unknown, already dead (a probe that started before), or reported
	}
	o.suspected[name] = true
	o.push(name, p, KindSuspect)
}

var (
	suspectPrefix = []byte("[INFO] memberlist: Suspect ")
	suspectSuffix = []byte(" has failed, no acks received")
)

// logTap sits between memberlist's logger and the configured log output and
// reports suspicions to the observer. log.Logger serializes calls to Write
// and hands it one whole line at a time.
type logTap struct {
	next io.Writer
	obs  *observer
}

func (w *logTap) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	if i := bytes.Index(line, suspectPrefix); i >= 0 && bytes.HasSuffix(line, suspectSuffix) {
		name := line[i+len(suspectPrefix) : len(line)-len(suspectSuffix)]
		w.obs.suspect(string(name))
	}
	return w.next.Write(p)
}

// metaDelegate advertises the member's metadata and hands leave notices to
// the observer. cur is swapped atomically when the member starts
// leaving; the other fields are immutable.
type metaDelegate struct {
	incarnation uint64
	role        string
	obs         *observer
	cur         atomic.Pointer[[]byte]
}

func (d *metaDelegate) setLeaving() ([]byte, error) {
	b, err := encodeMeta(nodeMeta{Incarnation: d.incarnation, Role: d.role, Leaving: true})
	if err != nil {
		return nil, err
	}
	d.cur.Store(&b)
	return b, nil
}

// NodeMeta implements memberlist.Delegate.
func (d *metaDelegate) NodeMeta(limit int) []byte {
	b := *d.cur.Load()
	if len(b) > limit {
		return nil
	}
	return b
}

// NotifyMsg implements memberlist.Delegate. The only user message is a
// peer's leave notice; anything else is ignored. It must not block and keeps
// no reference to b.
func (d *metaDelegate) NotifyMsg(b []byte) { d.obs.leaveNotice(b) }

// GetBroadcasts implements memberlist.Delegate: none.
func (d *metaDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate: no user state.
func (d *metaDelegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate: no user state.
func (d *metaDelegate) MergeRemoteState(buf []byte, join bool) {}
