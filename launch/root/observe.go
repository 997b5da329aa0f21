package root

// The root's observer (Options.Observe): typed events a test waits on and
// checks instead of the root's words, each told by the event loop when the
// state it names was reached.

// Event is something a root did, told to Options.Observe.
type Event interface{ isObserved() }

// TablePublished: every rank published its I-tuple, and the root
// broadcast the node table of N ranks (once per job).
type TablePublished struct{ N int }

// StandbysUp: the N agents below the root's children hold their standby
// links to their backup parents: a lost parent's children can move.
type StandbysUp struct{ N int }

// AgentLost: the root declared an agent incarnation lost (Silent: its link
// fell silent rather than ended).
type AgentLost struct {
	Node   string
	Inc    uint64
	Silent bool
}

// Reparented: the agent of Node moved below Parent, its backup or a
// fallback parent ("" for the root).
type Reparented struct{ Node, Parent string }

// AgentRelaunched: a lost agent's next incarnation Inc is up on Node (the
// lost node's name, a spare's, or a survivor's "host+node").
type AgentRelaunched struct {
	Agent int // the agent's index in the plan
	Node  string
	Inc   uint64
}

// RankRestarted: rank Rank runs again as incarnation Inc (its I-tuple
// published, or, started again alone, its agent said it started).
type RankRestarted struct {
	Rank int
	Inc  uint64
}

// Recovered: every live agent carried out a recovery's last phase ("resumed"
// or "restarted") under epoch Epoch.
type Recovered struct {
	Epoch uint64
	Stage string
}

// ReplicaJoined: the root replica on Node joined the state log's group.
type ReplicaJoined struct{ Node string }

// RanksEnded: every rank ended, and the agents were told to exit.
type RanksEnded struct{}

// FailoverDone: a successor root on Node took over from the lost
// front-end (its event loop starts next).
type FailoverDone struct{ Node string }

// OpenAtTimeout: the job ran into --timeout while collective Kind #Seq
// (its number in its epoch) was open, waiting for the agents of Missing.
type OpenAtTimeout struct {
	Kind    string
	Seq     uint64
	Missing []string
}

// CollectiveWaits: a subtree's part of collective Kind #Seq reached the
// root, which waits for more: the parts in cover Covered agents.
type CollectiveWaits struct {
	Kind    string
	Seq     uint64
	Covered int
}

// Adopted: a successor root adopted the agent of Node, a child of the lost
// root (or an orphan whose last fallback is the root).
type Adopted struct{ Node string }

func (OpenAtTimeout) isObserved()   {}
func (TablePublished) isObserved()  {}
func (AgentLost) isObserved()       {}
func (Reparented) isObserved()      {}
func (AgentRelaunched) isObserved() {}
func (RankRestarted) isObserved()   {}
func (Recovered) isObserved()       {}
func (FailoverDone) isObserved()    {}
func (ReplicaJoined) isObserved()   {}
func (StandbysUp) isObserved()      {}
func (RanksEnded) isObserved()      {}
func (Adopted) isObserved()         {}
func (CollectiveWaits) isObserved() {}

// observe tells Options.Observe of ev, from the event loop.
func (fe *frontend) observe(ev Event) {
	if fe.opts.Observe != nil {
		fe.opts.Observe(ev)
	}
}

// parentName is the name of agent x's parent ("" for the root).
func (fe *frontend) parentName(x int) string {
	if p := fe.topo.Parent(x); p >= 0 {
		return fe.agents[p].name
	}
	return ""
}

// vanish ends the front-end as a SIGKILL of its process would
// (Options.Vanish): the state log's replica and transport stop
// (journal.Group.Vanish), then gossip, the listener and every link close.
func (fe *frontend) vanish() {
	fe.journal.Vanish(func() {
		fe.stopGossip()
		if fe.ln != nil {
			fe.ln.Close()
		}
		for _, a := range fe.agents {
			if a.link != nil {
				a.link.Conn.Close()
			}
		}
	})
}
