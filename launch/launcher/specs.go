package launcher

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// ChildSpecs issues the credentials of agents idx (named by name) with ca
// and describes each for the launcher that starts it: with its subtree in
// t, which it starts in turn.
func ChildSpecs(ca *secure.CA, t *topology.Tree, name func(int) string, idx []int) ([]proto.ChildSpec, error) {
	cs := make([]proto.ChildSpec, 0, len(idx))
	for _, i := range idx {
		creds, err := ca.Issue(name(i))
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", name(i), err)
		}
		cs = append(cs, proto.ChildSpec{Idx: i, Name: name(i), Creds: creds.Marshal(), Sub: t.Subtree(i)})
	}
	return cs, nil
}

// SuccessorSpec tells an agent how to start its children: as tmpl says
// (the front-end's Spec(false); a successor root's, as its own agent was
// told), in batches for a leaf launcher (leaf) as this root's agents
// start them.
func (g Agents) SuccessorSpec(tmpl proto.LaunchSpec, leaf bool) proto.LaunchSpec {
	tmpl.Batch = 0
	if leaf {
		tmpl.Batch = g.Batch
	}
	return tmpl
}

// ReplicaSpec is what a replica agent is given: enough to take the root
// over, also in the middle of the launch: the job's state directory, the
// group's size, the job's CA (nil: none) and each agent's ranks.
func ReplicaSpec(jobDir string, replicas int, ca *secure.CA, placement [][]int) proto.ReplicaSpec {
	rs := proto.ReplicaSpec{JobDir: jobDir, Replicas: replicas, Placement: placement}
	if ca != nil {
		rs.CA = ca.Marshal()
	}
	return rs
}

// UpWords says how an agent came up, for --verbose: this machine's agent
// (local), in the front-end's process or as a process, on a socket pair;
// else started by by ("ssh", "srun", "process": Agents.StartedBy), as its
// launcher measured it (up).
func UpWords(local *LocalAgent, by string, up proto.ChildUp) string {
	switch {
	case local != nil && local.InProcess:
		return "in the front-end's process, on a socket pair"
	case local != nil:
		return "a local process on a socket pair"
	}
	return fmt.Sprintf("%s %.1f ms, %d attempt(s), connected %.1f ms after its launcher began", by, up.SSH.Seconds()*1e3, up.Attempts, up.Up.Seconds()*1e3)
}

// RelaunchSpec is what incarnation inc of a lost agent, whose node runs
// ranks, is told beyond the node's share: where the recovery stands (st:
// its epoch, the node table's version, whether ranks start held until the
// resume), the epoch the collectives are counted under (collEpoch), the
// node table, and which incarnation of each of its ranks was lost (led).
func RelaunchSpec(inc uint64, ranks []int, st recovery.Status, led recovery.Ledger, collEpoch uint64, table [][]byte) *proto.RelaunchSpec {
	rl := &proto.RelaunchSpec{Incarnation: inc, Epoch: st.Epoch, CollEpoch: collEpoch, Version: st.Version, Table: table, Suspended: st.Suspends}
	for _, r := range ranks {
		rl.Incs = append(rl.Incs, led.Runs(r))
	}
	return rl
}
