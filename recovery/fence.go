package recovery

import "time"

// Fencing a node that does not answer (docs/recovery.md, "Fencing").
//
// A lost agent's node is fenced from outside before any rank of its
// replaces one of its own (FenceDone). A crashed or cut-off host does not
// answer that fence: its spawner's connection just times out. What is left
// there is then the agent's own to end: under a restart policy an agent
// kills its ranks once every upward path it has (its parent link, its
// standby link to its backup parent, a gossip peer's answer to its probe)
// was silent for SelfFence.Agent (launch/agent/selffence.go). The root takes
// a fence that has not reached its node for done once that bound has
// surely passed on the node's side too (SelfFenceAt): no replacement of a
// rank starts while its older incarnation may still run.
//
// The bounds follow detection's shortest silence: an agent is declared
// lost on gossip's word only once the link that would say otherwise has
// been quiet for its ping interval and the confirmation margin
// (proto.Link.ConfirmSilence; a parent confirms for its children by the
// same rule); the link's own timeout, four heartbeats and a slack, is
// longer. So by the time the root declares a node lost, the node's last
// word is at least Root old, and the root waits for nothing more. A node
// declared on the end of its link (EOF) answered that end: it is alive,
// the fence reaches it.

// FenceHow is how a fence was confirmed (FenceDone.How).
type FenceHow string

const (
	// FenceKilled: the fence reached the node and what the lost
	// incarnation left there ended (or the fence failed after it
	// reached the node, or on a spawner that reaches or fails at once:
	// test nodes, srun).
	FenceKilled FenceHow = "fenced"
	// FenceSelf: the fence had not reached the node within FenceGrace
	// and the node had been silent for SelfFence.Root: its agent killed
	// its ranks itself (or the host is down).
	FenceSelf FenceHow = "self-fenced"
)

// FenceGrace is how long a fence may take to reach its node (for SSH: the
// TCP connection, dialled again every 250 ms against a lost SYN) before
// the node counts as not answering. A node that answers within it is
// waited for: a stopped agent on a live host is killed by the fence.
const FenceGrace = 500 * time.Millisecond

// SelfFence is the self-fence bounds for a heartbeat's ping interval (an
// agent's uplink ping, proto.UplinkPing) and gossip's confirmation margin
// (proto.Timing.ConfirmQuiet).
type SelfFence struct{ Ping, Confirm time.Duration }

// Root is the least silence of a node the root declares lost on silence
// (ConfirmSilence): ping + confirm (2 s with the default heartbeat).
func (s SelfFence) Root() time.Duration { return s.Ping + s.Confirm }

// Agent is L, the silence of every upward path after which an agent kills
// its ranks: confirm - 2 pings (1.625 s). The root stops hearing a node
// within 1.5 pings of the cut (a live child writes up at least every 1.5
// ping intervals), and the agent looks every Tick: it has killed its
// ranks at most Agent + Tick after its last word, which is before the
// root's Root after the root's last word, by 1.5 pings - Tick.
func (s SelfFence) Agent() time.Duration { return s.Confirm - 2*s.Ping }

// Tick is how often an agent looks at its upward paths: a fifth of the
// ping interval, at least 10 ms.
func (s SelfFence) Tick() time.Duration { return max(s.Ping/5, 10*time.Millisecond) }

// SelfFenceAt is when the root may confirm the fence of a lost node that
// its fence has not reached (FenceSelf): once the node has been silent for
// Root — declared at declared, after a silence of covered (what the
// detection already saw; 0 if it does not know) — and once the fence,
// begun at began, had FenceGrace to reach it.
func (s SelfFence) SelfFenceAt(declared time.Time, covered time.Duration, began time.Time) time.Time {
	at := declared.Add(max(s.Root()-covered, 0))
	if g := began.Add(FenceGrace); g.After(at) {
		at = g
	}
	return at
}

// The self-fence's timer, decided here and armed by the root: when the
// root begins a fence from outside (FenceBegan, with what its detection
// saw of the node's silence), the planner says when the fence counts as
// the node's own if it has not reached the node by then (AwaitSelfFence:
// SelfFenceAt). The root's timer tells it that time passed without the
// fence reaching the node (SelfFenceDue), and the planner takes the fence
// as confirmed, self-fenced (SelfFenced, then what FenceDone does).

// FenceBegan: the root began fencing incarnations up to Incarnation of
// agent Agent on Node at Began.
type FenceBegan struct {
	Agent       int
	Node        string
	Incarnation uint64
	Began       time.Time
}

// SelfFenceDue: the time AwaitSelfFence named passed and the fence had
// not reached its node.
type SelfFenceDue struct {
	Agent       int
	Node        string
	Incarnation uint64
}

func (FenceBegan) isEvent()   {}
func (SelfFenceDue) isEvent() {}

// AwaitSelfFence: if the fence of Agent's incarnations up to Incarnation
// on Node has not reached the node by At, step SelfFenceDue then.
type AwaitSelfFence struct {
	Agent       int
	Node        string
	Incarnation uint64
	At          time.Time
}

// SelfFenced: the fence of Node (incarnations up to Incarnation) did not
// reach it, which has been silent for Silence (the self-fence bound): its
// agent killed its ranks itself, and the fence counts as confirmed.
type SelfFenced struct {
	Agent       int
	Node        string
	Incarnation uint64
	Silence     time.Duration
}

func (AwaitSelfFence) isAction() {}
func (SelfFenced) isAction()     {}

// fenceBegan decides when a fence that has not reached its node counts as
// the node's own: from when the incarnation was declared lost and how
// long its node had been silent then (noteDeclared), or, for one the
// planner did not see declared (lost with an agent above it, or by a lost
// leader), from the fence's beginning with no silence known.
func (p *Planner) fenceBegan(ev FenceBegan) []Action {
	declared, covered := ev.Began, time.Duration(0)
	if ev.Agent >= 0 && ev.Agent < len(p.agents) {
		if d := p.agents[ev.Agent].declared; d.inc == ev.Incarnation && !d.at.IsZero() {
			declared, covered = d.at, d.silence
		}
	}
	at := p.cfg.SelfFence.SelfFenceAt(declared, covered, ev.Began)
	return []Action{AwaitSelfFence{Agent: ev.Agent, Node: ev.Node, Incarnation: ev.Incarnation, At: at}}
}

// declaration is when an agent incarnation was declared lost, and how
// long its node had been silent then as far as the root knew (0: not
// silent, or not known).
type declaration struct {
	inc     uint64
	at      time.Time
	silence time.Duration
}

// noteDeclared notes the declaration of incarnation inc of the agent whose
// link ended (the first one counts): the self-fence bound counts from the
// node's last word.
func (p *Planner) noteDeclared(ev LinkLost, inc uint64) {
	if ev.Agent >= len(p.agents) {
		return
	}
	d := &p.agents[ev.Agent].declared
	if d.inc == inc && !d.at.IsZero() {
		return
	}
	*d = declaration{inc: inc, at: ev.At, silence: p.silenceAt(ev)}
}

// silenceAt is how long the node of the agent whose link ended had been
// silent then: none for a link that ended (its node answered that end);
// on a heartbeat's timeout, the root's own link's quiet; for a child of
// the lost root a successor never heard, since the successor started;
// else (its parent found it silent: gossip's hysteresis, ConfirmSilence,
// or the link's timeout) at least Root.
func (p *Planner) silenceAt(ev LinkLost) time.Duration {
	switch {
	case !ev.Silent:
		return 0
	case ev.Direct:
		return ev.Quiet
	case p.rootChild(ev.Agent) && p.cfg.Resumed:
		return ev.At.Sub(p.cfg.Started)
	}
	return p.cfg.SelfFence.Root()
}

// selfFenceDue confirms a fence that has not reached its node in time as
// its node's own, unless it was confirmed already.
func (p *Planner) selfFenceDue(ev SelfFenceDue) []Action {
	if ev.Agent < 0 || ev.Agent >= len(p.agents) || p.agents[ev.Agent].fenced[ev.Node] >= ev.Incarnation {
		return nil
	}
	acts := []Action{SelfFenced{Agent: ev.Agent, Node: ev.Node, Incarnation: ev.Incarnation, Silence: p.cfg.SelfFence.Root()}}
	return append(acts, p.fenceDone(FenceDone{Agent: ev.Agent, Node: ev.Node, Incarnation: ev.Incarnation, How: FenceSelf})...)
}
