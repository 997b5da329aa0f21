package root

// The root and the job's state log: the plan and the final status it
// commits, its replica group.

import (
	"cmp"
	"context"
	"os"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/hashicorp/raft"
)

// journalPlan records the launch tree (or the single local agent); change
// says what changed since the last one ("": the first).
func (fe *frontend) journalPlan(change string) {
	names := fe.agentNames()
	if !fe.tree {
		fe.journal.Plan(journal.FlatPlan(names))
		return
	}
	p := journal.TreePlan(fe.topo.Kind(), names, fe.topo.Parent, fe.topo.Backup, func(i int) bool { return fe.replicaNodes[i] })
	p.Change = change
	if change == "" {
		p.Model = fe.model.Prediction()
	}
	fe.journal.Plan(p)
}

// closeJournal commits the job's final status, or waits for the commit
// begun (beginCloseJournal).
func (fe *frontend) closeJournal() { fe.beginCloseJournal()() }

// beginCloseJournal starts committing the job's final status, the
// planner's as it is now (the agents' exits after it change nothing it
// would say), and returns its wait (journal.Group.EndWith).
func (fe *frontend) beginCloseJournal() (wait func()) {
	code, msg := fe.status().Final(fe.exitCode)
	if fe.collStats.Answered > 0 && !fe.journal.Closing() {
		fe.journal.Collectives(journal.CollTotals{Kinds: fe.collStats.Totals()})
	}
	return fe.journal.EndWith(code, msg, journal.Ending{JobID: fe.jobID, Warnf: fe.warnf, Verbosef: fe.verbosef, Verbose: fe.opts.Verbose,
		Where: func() bool { return fe.opts.Verbose || fe.status().Failure != nil }})
}

// issueRoot makes the job's CA and the front-end's credentials (once:
// launcher.IssueRoot).
func (fe *frontend) issueRoot() (err error) {
	if fe.ca == nil {
		fe.ca, fe.rootCreds, err = launcher.IssueRoot(fe.jobID)
	}
	return err
}

// journalConfig configures the job's state log (journal.FrontEndConfig):
// a single voter in the front-end, or with --replicas R the first of a
// group whose other members are agents (tr, its transport). It stays up
// until the agents exit: a replica agent behind gets the final status.
func (fe *frontend) journalConfig(ctx context.Context) (journal.Config, *raft.NetworkTransport, error) {
	host, _ := os.Hostname()
	job := journal.Job{ID: fe.jobID, Argv: fe.opts.Argv, N: fe.opts.N, Start: fe.start, Replicas: fe.opts.Replicas,
		Restart: fe.opts.Restart.Record(), MaxRestarts: fe.opts.MaxRestarts, Spares: fe.opts.Spares,
		Slots: fe.slots, Oversubscribe: fe.opts.Oversubscribe, MPI: proto.MPIName(fe.opts.MPI)}
	creds := func() (*secure.Credentials, error) {
		err := fe.issueRoot()
		return fe.rootCreds, err
	}
	cfg, tr, err := journal.FrontEndConfig(ctx, fe.opts.StateDir, cmp.Or(host, "localhost"), job,
		fe.opts.Placement.NodeNames(fe.opts.TestNodes), fe.opts.Agents.Remote() || fe.opts.TestNodes > 1,
		creds, fe.opts.Agents.OwnAddr(), agentsExitWait)
	if fe.hooks.breakAt == loseLeadHook {
		// The lead is lost at the recovery's first commit and comes back
		// later than an unwatched writer would wait (Regain).
		cfg.LoseLeadAt, cfg.Regain = recovery.StageSuspend.String(), 100*time.Millisecond
	}
	return cfg, tr, err
}

// addReplica adds a replica agent to the group, in place of the lost
// voter replaces ("": none), from a goroutine: the journal's Join waits
// for the front-end's replica to lead and refuses once the job's end is
// being committed.
func (fe *frontend) addReplica(ru proto.ReplicaUp, replaces string) {
	fe.goFunc(func() {
		joined := fe.journal.AddReplica(fe.ctx, ru.Name, ru.Addr, replaces, fe.warnf, fe.verbosef)
		fe.put(evReplicaDone{name: ru.Name, joined: joined}) // joined or not, the end need not wait for it
	})
}

// refillGroup is a successor root's: the agent the planner chose
// (recovery.RefillGroup) is asked to host a replica in place of the lost
// front-end's voter, so the group keeps its size and survives this root's
// loss too; with none, the group goes on with one voter less.
func (fe *frontend) refillGroup(act recovery.RefillGroup) {
	if fe.status().Ending() {
		return
	}
	gone, servers := fe.journal.LostVoter(fe.agentNames()) // the front-end's voter: the one that is no agent's
	if gone == "" {
		return
	}
	if act.Agent < 0 {
		fe.verbosef("root group: no agent without a replica to host one in place of the lost front-end's (%s): the group goes on with %d voter(s)", gone, servers-1)
		return
	}
	a := fe.agents[act.Agent]
	fe.replicaNodes[a.idx] = true
	a.replaces = gone
	fe.replicas.FrontEndVotes = false
	fe.expectReplica(a)
	fe.verbosef("root group: node %s hosts a replica in place of the lost front-end's (%s)", a.name, gone)
	_ = a.send(proto.MHostReplica, proto.EncodeReplicaSpec(fe.replicaSpec()))
}
