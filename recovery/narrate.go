package recovery

import (
	"fmt"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// Narrate says what an action does in the user's words, as the root tells
// it when it carries the action out (--verbose, or, warn, always): the one
// renderer of the planner's actions, as Reason.Words is of its reasons;
// "" for an action told otherwise (its Reason, or nothing). name names an
// agent by its index (its node, as the root's handle has it); since is
// how long ago a time the action carries was (the root's clock).
// TestNarrate pins the words.
func Narrate(act Action, name func(int) string, since func(time.Time) time.Duration) (words string, warn bool) {
	parent := func(p int) string {
		if p == topology.Root {
			return "the root"
		}
		return name(p)
	}
	switch a := act.(type) {
	case Suspend:
		return fmt.Sprintf("recovery: suspending every rank (epoch %d)", a.Epoch), false
	case Respawn:
		return fmt.Sprintf("recovery: starting rank %d again on %s as incarnation %d", a.Rank, name(a.Agent), a.Incarnation), false
	case Patch:
		return fmt.Sprintf("recovery: patching the node table to version %d (%d row(s))", a.Version, len(a.Rows)), false
	case Resume:
		return fmt.Sprintf("recovery: resuming every rank (epoch %d)", a.Epoch), false
	case AwaitLaunch:
		return fmt.Sprintf("recovery: restarting every rank (restart %d, epoch %d) once the %d agent(s) not up yet are", a.Restarts, a.Epoch, a.Starting), false
	case RestartJob:
		if a.Deferred {
			return "recovery: every agent is up: restarting every rank", false
		}
		return fmt.Sprintf("recovery: restarting every rank (restart %d, epoch %d)", a.Restarts, a.Epoch), false
	case Relaunch:
		old, node := name(a.Agent), a.Node
		if node == "" {
			node = old
		}
		switch host := HostOf(node); {
		case host != node && node != old:
			return fmt.Sprintf("recovery: starting the agent of node %s on surviving node %s, as node %s, as incarnation %d (epoch %d)", old, host, node, a.Incarnation, a.Epoch), false
		case node != old:
			return fmt.Sprintf("recovery: starting the agent of node %s on spare node %s as incarnation %d (epoch %d)", old, node, a.Incarnation, a.Epoch), false
		}
		return fmt.Sprintf("recovery: starting the agent of node %s again as incarnation %d (epoch %d)", node, a.Incarnation, a.Epoch), false
	case RefuseAdoption:
		if w := a.Why.Words(); w != "" {
			return fmt.Sprintf("recovery: refused to adopt node %s (incarnation %d): %s", name(a.Agent), a.Incarnation, w), false
		}
		if h := a.Held; h != nil {
			return fmt.Sprintf("refused to adopt node %s (agent %d, incarnation %d; this root has %s, incarnation %d, child of the root %v, adopted %v, lost %v)",
				h.Name, a.Agent, a.Incarnation, name(a.Agent), h.Incarnation, h.RootChild, h.Adopted, h.Lost), false
		}
	case Fence:
		if a.Again {
			return fmt.Sprintf("recovery: fencing node %s (incarnation %d), which the lost root had not seen fenced", a.Node, a.Incarnation), false
		}
	case SelfFenced:
		return fmt.Sprintf("the fence of node %s (incarnation %d) has not reached it, which has been silent for %v: its agent killed its ranks itself",
			a.Node, a.Incarnation, a.Silence), false
	case Leads:
		if a.Stage != 0 {
			return fmt.Sprintf("carrying on the recovery of epoch %d at its %s phase", a.Epoch, a.Stage), true
		}
	case AwaitOrphans:
		moves := make([]string, 0, len(a.Moves))
		for _, m := range a.Moves {
			if m.Fallback {
				moves = append(moves, fmt.Sprintf("%s to a fallback parent (its backup is lost too)", name(m.Orphan)))
			} else {
				moves = append(moves, fmt.Sprintf("%s to %s", name(m.Orphan), name(m.Backup)))
			}
		}
		return fmt.Sprintf("recovery: node %s was lost with agents below it; moving them to new parents: %s", name(a.Agent), strings.Join(moves, ", ")), false
	case OrphanLate:
		return fmt.Sprintf("node %s did not reach a new parent in time after the loss of node %s: lost with it", name(a.Orphan), name(a.Agent)), true
	case OrphansArrived:
		return fmt.Sprintf("recovery: every agent below node %s reached a new parent in %v", name(a.Agent), since(a.Since).Round(time.Millisecond)), false
	case Moved:
		old := "the root"
		if a.From >= 0 {
			old = "node " + name(a.From)
		}
		switch {
		case a.To == topology.Root:
			return fmt.Sprintf("node %s moved to the root, its last fallback parent (%s and its backup parent were lost)", name(a.Agent), old), true
		case a.Fallback:
			return fmt.Sprintf("node %s moved to its fallback parent %s (%s was lost)", name(a.Agent), name(a.To), old), true
		}
		return fmt.Sprintf("node %s moved to its backup parent %s (%s was lost)", name(a.Agent), name(a.To), old), true
	case MoveIgnored:
		return fmt.Sprintf("recovery: node %s (incarnation %d) reached its new parent %s after it was declared lost: ignored", name(a.Agent), a.Incarnation, parent(a.Parent)), false
	case MoveFailed:
		return fmt.Sprintf("node %s cannot move under %s: %s", name(a.Agent), parent(a.Parent), a.Err), true
	case Suspect:
		return fmt.Sprintf("gossip: node %s is dead; its parent %s looks at its link", name(a.Agent), name(a.Parent)), false
	case DeclareLost:
		if !a.Linked {
			return fmt.Sprintf("gossip: node %s did not ask to be adopted", name(a.Agent)), false
		}
	case CheckAgain:
		if !a.Watched {
			return fmt.Sprintf("gossip: node %s's link has been quiet %v; looking again in %v", name(a.Agent), a.Quiet.Round(time.Millisecond), a.After.Round(time.Millisecond)), false
		}
	case KeptAlive:
		return fmt.Sprintf("gossip said node %s was dead, but its link spoke %v ago: kept (watched: its link's silence alone condemns it now)", name(a.Agent), a.Quiet.Round(time.Millisecond)), false
	case StandbysUp:
		return fmt.Sprintf("every standby link to a backup parent is up (%d)", a.N), false
	case SignalRanks, KillRanks:
		return signalNarration(act)
	case KillOverdue:
		if a.First {
			return a.words(name), true
		}
	}
	return "", false
}

// Change says what a redeal changed, for the state log's record of the
// tree (name as for Narrate).
func (r Redeal) Change(name func(int) string) string {
	lost := make([]string, len(r.Lost))
	for i, b := range r.Lost {
		lost[i] = name(b)
	}
	return fmt.Sprintf("lost node(s) %s start again as children of the root; backup parents dealt again", strings.Join(lost, ", "))
}
