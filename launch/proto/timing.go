package proto

import (
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// DefaultSlack is what a link's timeout allows beyond four heartbeat
// intervals: a second for a loaded machine (LinkTimeout).
const DefaultSlack = time.Second

// Timing is the failure detectors' bounds beyond the heartbeat interval.
// Its zero value is production's: each zero field stands for its default.
// It exists for tests (root.Options.Timing, carried to every agent in its
// NodeSpec), which shrink it together with the heartbeat so that a silent
// node is declared lost in a fraction of a second of test time, not 5 s;
// ftlaunch run never sets it.
type Timing struct {
	// Slack is a link's timeout beyond four heartbeat intervals, and a
	// loss's wait for its orphans beyond that timeout (0: DefaultSlack).
	Slack time.Duration
	// Confirm is how much longer than a child's ping interval its link
	// must have been quiet for gossip's "dead" to count (0: ConfirmQuiet).
	Confirm time.Duration
	// Adopt bounds an orphaned child of the root's search for a new root,
	// and a successor's wait for adoptions (0: AdoptWait).
	Adopt time.Duration
	// FastGossip has the job's gossip members use membership.TestProfile
	// instead of ClusterProfile (false: ClusterProfile).
	FastGossip bool
}

// LinkTimeout is how long a link's peer may stay silent before the link is
// declared dead: four heartbeat intervals hb and the slack.
func (t Timing) LinkTimeout(hb time.Duration) time.Duration {
	if t.Slack > 0 {
		return 4*hb + t.Slack
	}
	return LinkTimeout(hb)
}

// SlackOr is the slack (DefaultSlack if unset).
func (t Timing) SlackOr() time.Duration {
	if t.Slack > 0 {
		return t.Slack
	}
	return DefaultSlack
}

// OrphanWait bounds how long a root waits for a lost agent's children to
// reach their backup parents: an orphan that missed the root's word sees
// its parent's link fall silent (LinkTimeout), and the slack.
func (t Timing) OrphanWait(hb time.Duration) time.Duration {
	return t.LinkTimeout(hb) + t.SlackOr()
}

// ConfirmQuiet is gossip's hysteresis (ConfirmQuiet if unset).
func (t Timing) ConfirmQuiet() time.Duration {
	if t.Confirm > 0 {
		return t.Confirm
	}
	return ConfirmQuiet
}

// AdoptWait is an orphan's bound on finding a new root (AdoptWait if
// unset).
func (t Timing) AdoptWait() time.Duration {
	if t.Adopt > 0 {
		return t.Adopt
	}
	return AdoptWait
}

func encodeTiming(e *wire.Encoder, t Timing) {
	e.Int(int64(t.Slack)).Int(int64(t.Confirm)).Int(int64(t.Adopt)).Bool(t.FastGossip)
}

func decodeTiming(d *wire.Decoder) Timing {
	return Timing{Slack: time.Duration(d.Int()), Confirm: time.Duration(d.Int()), Adopt: time.Duration(d.Int()), FastGossip: d.Bool()}
}
