package launcher

import (
	"context"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/membership"
	"github.com/ftlaunch/ftlaunch/raftstore"
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
