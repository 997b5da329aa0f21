package launcher

import (
	"context"
	"fmt"
	"slices"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/membership"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// What the two roles share about a root failover: the successor root's
// inputs, given by the replica agent that won the root group's election,
// and the way the successor starts the root's children (the replica
// agent's launcher).

// RelaunchHooks are what a successor's launcher of its children (the
// replica agent's, injected as ResumeConfig.Relaunch) gets of the root:
// where its messages go and the root's owner of goroutines.
type RelaunchHooks struct {
	Logf func(format string, args ...any)
	Go   func(func())
}

// ResumeConfig is what a replica agent that won the root group's election
// gives the successor root: its own spec (the job's launch, its node, the
// replica's files), the replica with the job's state, the other replicas,
// and the way it starts the root's children.
type ResumeConfig struct {
	Spec     *proto.NodeSpec
	Replica  *raftstore.Replica
	Peers    []proto.PeerAddr
	Relaunch func(ctx context.Context, cs []proto.ChildSpec, h RelaunchHooks, report func(LaunchResult)) error
	// Fence kills on node what its lost agent incarnations up to upTo
	// left there (Launcher.Fence, with the replica agent's spawner).
	Fence FenceFunc
	// Gossip is the evidence of the replica agent's member of the job's
	// gossip cluster (nil: it has none).
	Gossip <-chan membership.Evidence
	// Gone names the replica agent whose successor root this agent
	// reported to until its link to it ended (not fell silent): its
	// process ended, its agent with it. The successor declares it lost at
	// once.
	Gone []string
}

// Relauncher is Relaunch bound to the successor root's context and hooks:
// how it starts the root's children.
func (c ResumeConfig) Relauncher(ctx context.Context, h RelaunchHooks) func(cs []proto.ChildSpec, report func(LaunchResult)) error {
	return func(cs []proto.ChildSpec, report func(LaunchResult)) error { return c.Relaunch(ctx, cs, h, report) }
}

// Takeover is the job as a successor root takes it over, rebuilt from the
// replicated state alone: the job's record, its agents, ranks and tree
// (journal.Resume, recovery.ResumedTree), the agents that host root
// replicas (the peers'), the job's CA (nil: none), where the root takes
// control connections (its own agent's listener, as the state records
// it; none: not recorded) and the epoch its collectives count under (the
// last recovery checkpoint's; 0: none).
type Takeover struct {
	State     *raftstore.State
	Job       journal.Job
	Resumed   *journal.Resumed
	Tree      *topology.Tree
	Replicas  map[int]bool
	CA        *secure.CA
	Control   []string
	CollEpoch uint64
}

// Takeover rebuilds the job from a copy of the replica's state (TakeoverOf).
func (c ResumeConfig) Takeover() (*Takeover, error) {
	return TakeoverOf(c.Replica.FSM().Copy(), c.Spec, c.Peers)
}

// TakeoverOf rebuilds the job from st for the successor root run by the
// replica agent told spec, whose replica peers are peers.
func TakeoverOf(st *raftstore.State, spec *proto.NodeSpec, peers []proto.PeerAddr) (*Takeover, error) {
	job, err := journal.DecodeJob(st.Job.Spec)
	if err != nil {
		return nil, err
	}
	r, err := journal.Resume(st, st.Job.Size, spec.Replica.Placement)
	if err != nil {
		return nil, err
	}
	t, err := recovery.ResumedTree(r)
	if err != nil {
		return nil, err
	}
	tk := &Takeover{State: st, Job: job, Resumed: r, Tree: t, Replicas: map[int]bool{}}
	for _, p := range peers {
		tk.Replicas[p.Idx] = true
	}
	if len(spec.Replica.CA) > 0 {
		if tk.CA, err = secure.UnmarshalCA(spec.Replica.CA); err != nil {
			return nil, fmt.Errorf("the job's CA: %w", err)
		}
	}
	if ag, ok := st.Agents[spec.Node]; ok && ag.Addr != "" {
		tk.Control = []string{ag.Addr}
	}
	if rec, ok := recovery.CheckpointOf(st); ok {
		tk.CollEpoch = rec.Epoch
	}
	return tk, nil
}

// ProbeGone looks, once, on goroutines of goFunc (which joins them),
// whether the agents of the replica peers among agents are gone: a
// refused connection to a peer's address says so at once, and gone is
// told why. One that is up, or does not answer (perhaps cut off), is left
// to the adoption's bound.
func ProbeGone(ctx context.Context, peers []proto.PeerAddr, agents []int, goFunc func(func()), gone func(idx int, why error)) {
	for _, p := range peers {
		if !slices.Contains(agents, p.Idx) {
			continue
		}
		goFunc(func() {
			if proto.Refused(ctx, p.Addr) {
				gone(p.Idx, fmt.Errorf("it did not ask the new root to adopt it and its address %s refuses connections: its agent is gone", p.Addr))
			}
		})
	}
}
