package recovery

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// The seeded adversarial world of the restart protocol (restart_test.go),
// extended to the loss of nodes in a launch tree: a node's agent dies (its
// link ends, or its node goes silent), interior agents with children that
// move to their backup parents or, with the backup lost too, to a
// fallback (the root); orphans arrive late or not at all; faults come on
// top of faults and the root's leader changes. The root's part is played
// as launch/root plays it: LinkLost with the links as they stand when it
// is delivered, Fence answered by FenceDone, AwaitOrphans by the orphans'
// arrivals (Reparented) and the wait's end (OrphansDue); the planner takes
// each lost agent's AgentLost itself (Lost).

// linkEnd: the root's detectors confirm that agent's link is gone (held by
// the adversary until delivered: the links are read then).
type linkEnd struct {
	agent  int
	silent bool
}

// arrival: an orphan (incarnation inc) reaches its new parent (to;
// topology.Root: the root adopts it). A parent that is gone by then sends
// it on to the root; an orphan gone by then arrives nowhere.
type arrival struct {
	orphan, to int
	inc        uint64
}

// orphansDue: the wait of loss for its orphans passed.
type orphansDue struct{ loss int }

func (linkEnd) isEvent()    {}
func (arrival) isEvent()    {}
func (orphansDue) isEvent() {}

// seen counts what the node-loss worlds went through, so that the test
// knows it covered it.
type seen struct {
	interior, silent, leader, double, fallback, late, ignored, moved, ended int
}

// nodeWorld is a world whose agents form lossTree (n0 and n1 under the
// root, n2..n6 below them), one rank each.
func nodeWorld(t *testing.T, seed uint64, policy Policy, cov *seen) *world {
	cfg := Config{Policy: policy, Ranks: 7, Agents: 7, RankAgent: []int{0, 1, 2, 3, 4, 5, 6}, MaxRestarts: 1000,
		AckTimeout: time.Second, TableReady: true, Nodes: []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6"},
		Tree: lossTree(t), OrphanWait: orphanWait, Oversubscribe: true,
		SelfFence: SelfFence{Ping: time.Second, Confirm: time.Second}}
	w := newWorldConfig(t, seed, cfg)
	w.closed = make([]bool, cfg.Agents)
	w.p.haveLinks(w.rootLinks())
	w.resolve = func(ev Event) (Event, bool) {
		switch ev := ev.(type) {
		case linkEnd:
			err := "EOF"
			if ev.silent {
				err = "heartbeat timeout"
			}
			return LinkLost{Agent: ev.agent, Err: err, Silent: ev.silent, At: time.Unix(0, 0)}, true
		case arrival:
			switch {
			case w.agentInc[ev.orphan] != ev.inc:
				return nil, false // replaced meanwhile
			case w.closed[ev.orphan]:
				// Declared lost meanwhile, but cut off rather than dead:
				// its new parent reports it all the same.
			case !w.agentUp[ev.orphan]:
				return nil, false // dead on its way
			}
			to := ev.to
			if to != topology.Root && (!w.agentUp[to] || w.closed[to]) {
				to = topology.Root // its next fallback
			}
			return Reparented{Agent: ev.orphan, Parent: to, Incarnation: ev.inc}, true
		case orphansDue:
			return OrphansDue{Loss: ev.loss}, true
		}
		return ev, true
	}
	w.nodeAct = func(act Action) bool {
		switch a := act.(type) {
		case LoseSubtree:
			for _, x := range a.Closed {
				w.closed[x] = true
			}
			for _, x := range a.Lost {
				// Declared lost: whatever still runs of it (cut off, not
				// dead) may run its ranks until its fence.
				if w.agentUp[x] {
					w.downAgent(x)
				}
			}
		case AwaitOrphans:
			for _, m := range a.Moves {
				to := m.Backup
				if m.Fallback {
					to = topology.Root
				}
				if w.rng.IntN(6) > 0 { // else: it never arrives
					w.events = append(w.events, arrival{orphan: m.Orphan, to: to, inc: w.agentInc[m.Orphan]})
				}
			}
			w.events = append(w.events, orphansDue{loss: a.Loss})
		case Lost: // the planner's AgentLost decisions follow
		case Moved:
			cov.moved++
			if a.Fallback || a.To == topology.Root {
				cov.fallback++
			}
		case MoveIgnored:
			cov.ignored++
		case OrphanLate:
			cov.late++
		case OrphansArrived, Redeal:
		case MoveFailed:
			w.fatalf("the tree refused a move: %+v", a)
		default:
			return false
		}
		return true
	}
	return w
}

// downAgent notes agent a's process gone (or cut off): its ranks may run
// on until the fence of its incarnation.
func (w *world) downAgent(a int) {
	w.agentUp[a] = false
	w.lost = append(w.lost, [2]uint64{uint64(a), w.agentInc[a]})
	for r := range w.zombies {
		if w.cfg.RankAgent[r] == a {
			w.zombies[r] = append(w.zombies[r], w.agentInc[a])
		}
	}
}

// loseNode kills agent a (its children live on): the root finds its link
// gone, ended or silent.
func (w *world) loseNode(a int, silent bool) {
	if !w.agentUp[a] || w.closed[a] {
		return
	}
	w.failures++
	w.downAgent(a)
	w.events = append(w.events, linkEnd{agent: a, silent: silent})
}

// nodeLeaderChange is leaderChange in the node-loss world: the new root
// knows the tree as committed, and finds the link of every agent that is
// gone (it is not adopted) gone again.
func (w *world) nodeLeaderChange() {
	w.leaderChange()
	for a, up := range w.agentUp {
		if !up {
			w.closed[a] = false
			w.events = append(w.events, linkEnd{agent: a})
		}
	}
	w.p.haveLinks(w.rootLinks())
}

// monotonic is the check after each step of every world: the planner's
// epoch and each rank's incarnation (the one it runs, or for a rank that
// failed and awaits its respawn, the one it starts next: a new leader's
// planner knows it as failed) never go back, across leader changes too,
// and a launch tree stays a tree.
func (w *world) monotonic() func() {
	inc := make([]uint64, w.cfg.Ranks)
	var epoch uint64
	return func() {
		w.t.Helper()
		if e := w.p.Epoch(); e < epoch {
			w.fatalf("epoch %d after %d", e, epoch)
		} else {
			epoch = e
		}
		for r := range inc {
			i := w.p.Incarnation(r)
			if w.p.AwaitsRespawn(r) {
				i++
			}
			if i < inc[r] {
				w.fatalf("rank %d: incarnation %d after %d", r, i, inc[r])
			} else {
				inc[r] = i
			}
		}
		if w.cfg.Tree != nil {
			if err := isTree(w.cfg.Tree); err != nil {
				w.fatalf("%v", err)
			}
		}
	}
}

// isTree reports whether every agent's parent chain reaches the root, and
// each agent is its parent's child, once.
func isTree(t *topology.Tree) error {
	for a := range t.N() {
		seen := 0
		for x := a; x != topology.Root; x = t.Parent(x) {
			if seen++; seen > t.N() {
				return fmt.Errorf("agent %d: its parents go round", a)
			}
		}
		if n := len(slices.DeleteFunc(slices.Clone(t.Children(t.Parent(a))), func(c int) bool { return c != a })); n != 1 {
			return fmt.Errorf("agent %d is %d times among its parent %d's children", a, n, t.Parent(a))
		}
		if b := t.Backup(a); b >= 0 && (b == t.Parent(a) || t.InSubtree(b, a)) {
			return fmt.Errorf("agent %d: backup %d is its parent or below it", a, b)
		}
	}
	return nil
}

// TestNodeLossRandom explores random interleavings of node losses (leaf
// and interior, ended and silent links), orphans that move to their backup
// or a fallback parent, arrive late or never, rank failures, double faults
// and leader changes, under both restart policies. Every seed ends with
// the job recovered (or ended because a silent node had nowhere to go):
// every rank and agent incarnation started once, none while an older one
// may still run unfenced, the tree a tree, epochs and incarnations never
// going back, and every restart owed carried out.
func TestNodeLossRandom(t *testing.T) {
	var cov seen
	for seed := range uint64(1000) {
		rng := rand.New(rand.NewPCG(seed, 29))
		policy := Rank
		if seed%3 == 0 {
			policy = Job
		}
		w := nodeWorld(t, seed, policy, &cov)
		faults := 1 + rng.IntN(4)
		if faults > 1 {
			cov.double++
		}
		for step := 0; faults > 0 || len(w.events) > 0; step++ {
			if step > 20000 {
				w.fatalf("seed %d: no end", seed)
			}
			switch x := rng.IntN(14); {
			case faults > 0 && x <= 1:
				a := rng.IntN(7)
				if w.agentUp[a] && len(w.p.cfg.Tree.Children(a)) > 0 {
					cov.interior++
				}
				if w.agentUp[a] && x == 1 {
					cov.silent++
				}
				w.loseNode(a, x == 1)
				faults--
			case faults > 0 && x == 2:
				if r := rng.IntN(7); w.agentUp[w.cfg.RankAgent[r]] && !w.closed[w.cfg.RankAgent[r]] {
					w.kill(r)
				}
				faults--
			case faults > 0 && x == 3:
				w.nodeLeaderChange()
				cov.leader++
				faults--
			default:
				if !w.deliver() && faults > 0 {
					w.loseNode(rng.IntN(7), false)
					faults--
				}
			}
		}
		if f := w.p.Failure(); f != nil {
			if f.Why.Kind != ReasonAgentNoPlace {
				w.fatalf("seed %d: the job ended: %+v", seed, f.Why)
			}
			cov.ended++
			continue
		}
		w.checkEnd(true)
		for r, inc := range w.p.led.owed {
			if w.actual[r] < inc {
				w.fatalf("seed %d: rank %d owed a restart as incarnation %d, runs %d", seed, r, inc, w.actual[r])
			}
		}
	}
	t.Logf("covered: %+v", cov)
	if cov.interior == 0 || cov.silent == 0 || cov.leader == 0 || cov.double == 0 || cov.fallback == 0 || cov.late == 0 || cov.moved == 0 || cov.ignored == 0 {
		t.Fatalf("the worlds did not cover every kind of fault: %+v", cov)
	}
}
