// Package trial plans and judges the trials of `ftlaunch chaos`: a seeded
// schedule of faults over a job's launch plan, the ending each fault is
// promised under today's policy (no restart: any failure ends the job
// cleanly), and the invariants checked once a trial is over.
//
// It is pure. Running the job, applying the faults (signals from outside)
// and reading the state log are the caller's (cmd/ftlaunch/chaos*.go); this
// package gets a Topology before and an Outcome after, and returns a
// Trial and a list of Violations. Equal seeds give equal trials.
package trial

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fault is a kind of fault chaos can apply.
type Fault string

// The faults. Rank, agent, leaf, interior, replica and stop hit one node
// (or rank) of the plan; root hits the front-end; slow throttles an agent
// without killing it. Node and partition need the emulated cluster.
const (
	Rank      Fault = "rank"      // SIGKILL of one rank
	Agent     Fault = "agent"     // SIGKILL of any agent
	Leaf      Fault = "leaf"      // SIGKILL of an agent without children in the plan
	Interior  Fault = "interior"  // SIGKILL of an agent with children
	Root      Fault = "root"      // SIGKILL of the front-end
	Replica   Fault = "replica"   // SIGKILL of an agent hosting a root replica (--replicas 3 or 5)
	Node      Fault = "node"      // a whole host crashes (emulated cluster)
	Partition Fault = "partition" // a host's link is cut (emulated cluster)
	Stop      Fault = "stop"      // SIGSTOP of an agent, SIGCONT after 3x the detection time
	Slow      Fault = "slow"      // an agent stopped and continued in turn: slow, not dead
	Stall     Fault = "stall"     // SIGSTOP of the front-end, SIGCONT after StallFor: paused, not lost
	RaftCut   Fault = "raftcut"   // the front-end's raft traffic alone cut for RaftCutFor (--replicas 3 or 5): deposed, not lost
)

// StallFor is how long a stall holds the front-end stopped: what a long
// GC pause, VM steal or swap storm does; past the raft group's election
// timeout, short of the agents' link timeout.
const StallFor = 2 * time.Second

// RaftCutFor is how long a raftcut keeps the front-end's replica cut off
// from the root group (its tree links untouched): as long as a stall,
// past the group's election timeout, so the replica agents elect a leader
// without it (issue #27).
const RaftCutFor = StallFor

// AllFaults lists every fault in the order reports use.
var AllFaults = []Fault{Rank, Agent, Leaf, Interior, Root, Replica, Node, Partition, Stop, Slow, Stall, RaftCut}

// Cluster is where trials run.
type Cluster string

// The clusters.
const (
	TestNodes Cluster = "test-nodes" // local agent processes (--test-nodes)
	Emulated  Cluster = "emulated"   // network namespaces with sshd (chaos/cluster)
)

// Phase is the part of the job a fault hits.
type Phase string

// The phases. Any is a choice made per trial.
const (
	Launch Phase = "launch" // agents or ranks not all up yet
	Run    Phase = "run"    // every rank runs
	Any    Phase = "any"
	// Recovering: a run-phase rank kill (the trigger) starts a recovery, and
	// the trial's faults fall while it is under way (seen in the live
	// report). Needs a restart policy.
	Recovering Phase = "recovery"
)

// ParseFaults reads a comma-separated list of faults; "" gives nil (the
// caller's default).
func ParseFaults(s string) ([]Fault, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Fault
	for _, item := range strings.Split(s, ",") {
		f := Fault(strings.TrimSpace(item))
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("unknown fault %q (want any of %s)", item, joinFaults(AllFaults))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// ParsePhase reads --when.
func ParsePhase(s string) (Phase, error) {
	switch p := Phase(s); p {
	case Launch, Run, Any, Recovering:
		return p, nil
	}
	return "", fmt.Errorf("--when %q: want launch, run, recovery or any", s)
}

func joinFaults(fs []Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

// Topology is what a trial is planned over: the launch plan and the ranks'
// placement. Agents are numbered 0..Nodes-1 (test node i is "node{i}";
// on the emulated cluster, agent i runs on the hostfile's host i, named in
// Names).
type Topology struct {
	// Names[i] is agent i's node name as the job's messages and replica
	// files have it; nil: test nodes' names (NodeName).
	Names []string
	// Parent[i] is agent i's parent agent, -1 for a child of the root.
	Parent []int
	// Replicas are the agents hosting root replicas besides the front-end.
	Replicas []int
	// RankNode[r] is the agent of rank r.
	RankNode []int
	// Spares are the spare nodes' names (--spare-nodes), in the order the
	// planner takes them: a silent node's agent starts on the next one.
	// They are not agents of the plan and no fault targets them.
	Spares []string
}

// Nodes is the number of agents.
func (t Topology) Nodes() int { return len(t.Parent) }

// Children returns agent i's children (i = -1: the root's).
func (t Topology) Children(i int) []int {
	var c []int
	for j, p := range t.Parent {
		if p == i {
			c = append(c, j)
		}
	}
	return c
}

// Subtree returns agent i and every agent below it.
func (t Topology) Subtree(i int) []int {
	out := []int{i}
	for k := 0; k < len(out); k++ {
		out = append(out, t.Children(out[k])...)
	}
	return out
}

// RanksOf returns the ranks of agent i.
func (t Topology) RanksOf(i int) []int {
	var rs []int
	for r, n := range t.RankNode {
		if n == i {
			rs = append(rs, r)
		}
	}
	return rs
}

// NodeName is test node i's name.
func NodeName(i int) string { return "node" + strconv.Itoa(i) }

// Name is agent i's node name: Names[i], or test node i's.
func (t Topology) Name(i int) string {
	if i >= 0 && i < len(t.Names) {
		return t.Names[i]
	}
	return NodeName(i)
}

// Config is what every trial of a run shares.
type Config struct {
	Cluster    Cluster
	Faults     []Fault // nil: every fault with a target (Available)
	When       Phase
	Concurrent int // faults per trial: 1 or 2
	Replicas   int // root replicas: 1, 3 or 5
	// Policy is the job's restart policy ("": none); --when recovery
	// needs one.
	Policy Policy
	// RunLength is how long the application runs once every rank is up;
	// run-phase faults fall in its first half.
	RunLength time.Duration
	// Program is what the job runs ("": a client-library program).
	Program Program
}

// targets returns the agents a fault may hit (nil: none in this plan);
// rank, root and the emulated-only faults are handled by the caller.
func (t Topology) targets(f Fault, replicas int) []int {
	var out []int
	for i := range t.Nodes() {
		interior := len(t.Children(i)) > 0
		switch {
		case f == Agent, f == Stop, f == Slow, f == Node, f == Partition,
			f == Leaf && !interior, f == Interior && interior:
			out = append(out, i)
		case f == Replica && replicas > 1 && slices.Contains(t.Replicas, i):
			out = append(out, i)
		}
	}
	return out
}

// hasTarget says whether fault f has a target in the plan.
func (t Topology) hasTarget(f Fault, replicas int) bool {
	switch f {
	case Root, Stall:
		return true
	case RaftCut:
		return replicas > 1
	case Rank:
		return len(t.RankNode) > 0
	}
	return len(t.targets(f, replicas)) > 0
}

// Available lists the faults that apply to the cluster and have a target
// in the plan: the default of --faults.
func Available(c Cluster, t Topology, replicas int) []Fault {
	var out []Fault
	for _, f := range AllFaults {
		if (f == Node || f == Partition) && c != Emulated {
			continue
		}
		if t.hasTarget(f, replicas) {
			out = append(out, f)
		}
	}
	return out
}

// Validate refuses what a run cannot do: a fault the cluster cannot apply,
// a fault with no target in the plan (refused, never skipped), a plan too
// small for launch-phase faults.
func Validate(cfg Config, t Topology) error {
	if t.Nodes() < 1 {
		return errors.New("the plan has no agent: chaos needs at least one node")
	}
	if cfg.Concurrent != 1 && cfg.Concurrent != 2 {
		return fmt.Errorf("--concurrent %d: want 1 or 2", cfg.Concurrent)
	}
	for _, f := range cfg.Faults {
		if (f == Node || f == Partition) && cfg.Cluster != Emulated {
			return fmt.Errorf("fault %q needs --cluster emulated: test nodes share one network stack, there is no host to crash or link to cut", f)
		}
		if !t.hasTarget(f, cfg.Replicas) {
			why := "no agent of the plan fits"
			switch f {
			case Replica:
				why = "the job has a single root replica, in the front-end (use --replicas 3)"
			case Interior:
				why = "no agent of the plan has children (more --nodes, or a deeper --tree)"
			}
			return fmt.Errorf("fault %q has no target in the plan: %s", f, why)
		}
	}
	faults := cfg.Faults
	if faults == nil {
		faults = Available(cfg.Cluster, t, cfg.Replicas)
	}
	if cfg.Concurrent == 2 && t.Nodes() < 2 {
		return errors.New("--concurrent 2 needs at least 2 nodes")
	}
	if (cfg.When == Launch || cfg.When == Any) && t.Nodes() < 2 {
		return errors.New("launch-phase faults need at least 2 nodes: one is held back to keep the launch going")
	}
	if cfg.Program == MPI && cfg.Policy == RestartRank {
		return errors.New("an MPI program under --restart rank ends at its first rank's PMI init (MPI cannot replace one rank): use --restart job or none")
	}
	if cfg.When == Recovering {
		if cfg.Policy != RestartRank && cfg.Policy != RestartJob {
			return errors.New("--when recovery needs --restart rank or job: with no restart policy a failure ends the job, there is no recovery to hit")
		}
		if t.Nodes() < 2 {
			return errors.New("--when recovery needs at least 2 nodes: one for the rank that starts the recovery, one for the fault")
		}
	}
	if len(faults) == 0 {
		return errors.New("no fault to apply")
	}
	return nil
}

// Target is what a fault hits.
type Target struct {
	Node int // agent index; -1: the front-end
	Rank int // the rank, for a rank fault; else -1
	// Name is the node's name (Topology.Name), set by Schedule; empty:
	// test node Node's.
	Name string
}

// String names the target as the job's messages do.
func (t Target) String() string {
	switch {
	case t.Rank >= 0:
		return "rank " + strconv.Itoa(t.Rank)
	case t.Node < 0:
		return "front-end"
	case t.Name != "":
		return t.Name
	}
	return NodeName(t.Node)
}

// Action is one fault of a trial.
type Action struct {
	Fault  Fault
	Target Target
	// At is when the fault falls: after every rank runs (run phase), or
	// after its target is up (launch phase); with AfterPrevious, after the
	// trial's previous action was applied (a double fault: with no
	// restart the first ends the job within milliseconds, so the second
	// falls at once after it, At being 0).
	At            time.Duration
	AfterPrevious bool
	// InRecovery: the action falls once a recovery is seen under way
	// after the previous action (--when recovery), not at once.
	InRecovery bool
	// Trigger: the action only starts the recovery the others hit (the
	// rank kill of --when recovery).
	Trigger bool
}

// String is "rank rank 5" → "rank 5", "interior node1", "root front-end".
func (a Action) String() string {
	if a.Fault == Rank {
		return a.Target.String()
	}
	return string(a.Fault) + " " + a.Target.String()
}

// Trial is one job under a schedule of faults.
type Trial struct {
	Index int
	Seed  uint64
	Phase Phase // launch or run
	// Hold is the agent whose start is held back until the launch-phase
	// faults were applied, so that they fall during the launch; -1: none.
	Hold    int
	Actions []Action
}

// TrialSeed is trial i's seed: the run's seed itself for the first, so
// that `--seed S --trials 1` replays any trial printed with seed S.
func TrialSeed(base uint64, i int) uint64 {
	if i == 0 {
		return base
	}
	// splitmix64 of base+i: well spread, and pure.
	z := base + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Schedule plans trial index with its seed: which faults, on what, when.
// It is deterministic: equal arguments give equal trials.
func Schedule(index int, seed uint64, cfg Config, t Topology) (Trial, error) {
	if err := Validate(cfg, t); err != nil {
		return Trial{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x66746368616f73)) // "ftchaos"
	faults := cfg.Faults
	if faults == nil {
		faults = Available(cfg.Cluster, t, cfg.Replicas)
	}
	tr := Trial{Index: index, Seed: seed, Phase: cfg.When, Hold: -1}
	if tr.Phase == Any {
		tr.Phase = []Phase{Launch, Run}[rng.IntN(2)]
	}
	used := map[int]bool{} // agents already hit (or held)
	if tr.Phase == Recovering {
		// The trigger: a rank killed in the first half of the run starts
		// a recovery (rank and job recover it); the faults follow once
		// the recovery is seen under way.
		r := rng.IntN(len(t.RankNode))
		n := t.RankNode[r]
		used[n] = true
		tr.Actions = append(tr.Actions, Action{Fault: Rank, Target: Target{Node: n, Rank: r, Name: t.Name(n)},
			At: time.Duration(rng.Int64N(int64(cfg.RunLength)/2 + 1)), Trigger: true})
	}
	if tr.Phase == Launch {
		// Hold back a leaf that no fault needs up: prefer a leaf, since
		// nothing below it waits.
		leaves := t.targets(Leaf, cfg.Replicas)
		if len(leaves) == 0 {
			leaves = []int{t.Nodes() - 1}
		}
		tr.Hold = leaves[rng.IntN(len(leaves))]
		used[tr.Hold] = true
	}
	rootHit := false
	for k := 0; k < cfg.Concurrent; k++ {
		// Try the faults in a seeded order until one has a free target.
		order := rng.Perm(len(faults))
		var act *Action
		for _, i := range order {
			f := faults[i]
			a := Action{Fault: f, Target: Target{Node: -1, Rank: -1}}
			switch f {
			case Root, Stall, RaftCut: // one fault of the front-end per trial
				if rootHit {
					continue
				}
				rootHit = true
			case Rank:
				var free []int
				for r, n := range t.RankNode {
					if !used[n] {
						free = append(free, r)
					}
				}
				if len(free) == 0 {
					continue
				}
				a.Target = Target{Rank: free[rng.IntN(len(free))]}
				a.Target.Node = t.RankNode[a.Target.Rank]
				a.Target.Name = t.Name(a.Target.Node)
				used[a.Target.Node] = true // one fault per node
			default:
				var free []int
				for _, n := range t.targets(f, cfg.Replicas) {
					if !used[n] {
						free = append(free, n)
					}
				}
				if len(free) == 0 {
					continue
				}
				a.Target.Node = free[rng.IntN(len(free))]
				a.Target.Name = t.Name(a.Target.Node)
				// Nothing else falls in the subtree a kill takes down.
				for _, n := range t.Subtree(a.Target.Node) {
					used[n] = true
				}
			}
			act = &a
			break
		}
		if act == nil {
			return Trial{}, fmt.Errorf("trial %d: no free target for fault %d of %d (faults %s over %d nodes)",
				index, k+1, cfg.Concurrent, joinFaults(faults), t.Nodes())
		}
		switch {
		case tr.Phase == Recovering:
			act.AfterPrevious, act.InRecovery = true, k == 0
		case k > 0:
			act.AfterPrevious = true // at once
		case tr.Phase == Launch:
			act.At = time.Duration(rng.IntN(100)) * time.Millisecond
		default:
			act.At = time.Duration(rng.Int64N(int64(cfg.RunLength)/2 + 1))
		}
		tr.Actions = append(tr.Actions, *act)
	}
	return tr, nil
}
