package root

// The root and the job's state log: the plan and the final status it
// commits, its replica group (the front-end's raft voter and the replica
// agents it adds).

import (
	"cmp"
	"context"
	"os"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
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
	kind := fe.topo.Kind() // a successor's: the tree it rebuilt
	if fe.plan != nil {
		kind = fe.plan.Kind.String()
	}
	p := journal.TreePlan(kind, names, fe.topo.Parent, fe.topo.Backup, func(i int) bool { return fe.replicaNodes[i] })
	p.Change = change
	if change == "" {
		p.Model = fe.model.Prediction()
	}
	fe.journal.Plan(p)
}

// closeJournal commits the job's final status and says where the state
// log is; if it was begun (beginCloseJournal), it waits for that.
func (fe *frontend) closeJournal() {
	fe.beginCloseJournal()()
}

// beginCloseJournal starts committing the job's final status (the
// journal's last transaction and its sync) and returns at once; the
// function it returns waits for the commit, says where the state log is,
// and may be called again. The final status is the planner's as it is
// now: later events (the agents' exits after the job's end) change
// nothing it would say.
func (fe *frontend) beginCloseJournal() (wait func()) {
	code, msg := fe.status().Final(fe.exitCode)
	if fe.collStats.Answered > 0 && !fe.journal.Closing() {
		fe.journal.Collectives(journal.CollTotals{Kinds: fe.collStats.Totals()})
	}
	return fe.journal.BeginClose(code, msg, func(took time.Duration, err error) { // Run's deferred closeJournal waits
		if err != nil {
			fe.warnf("job state log: %v", err)
		}
		if fe.opts.Verbose {
			st := fe.journal.Stats()
			fe.verbosef("state log closed in %.1f ms: its replica had its files open %.1f ms and led %.1f ms after the job began; %d entries in %d flushes",
				ms(took), ms(st.Opened), ms(st.Leading), st.Entries, st.Flushes)
		}
		if err := fe.journal.RemoveLive(); err != nil {
			fe.warnf("%v", err)
		}
		if (fe.opts.Verbose || fe.status().Failure != nil) && fe.journal.Dir() != "" {
			fe.warnf("job %s: state in %s (ftlaunch inspect)", fe.jobID, fe.journal.Dir())
		}
	})
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
// group whose other members are agents (tr, its transport). The
// front-end's replica leads until the agents exit (journal.End): a
// replica agent a few entries behind gets the final status from it.
func (fe *frontend) journalConfig(ctx context.Context) (journal.Config, *raft.NetworkTransport, error) {
	host, _ := os.Hostname()
	job := journal.Job{ID: fe.jobID, Argv: fe.opts.Argv, N: fe.opts.N, Start: fe.start, Replicas: fe.opts.Replicas,
		Restart: fe.opts.Restart.Record(), MaxRestarts: fe.opts.MaxRestarts, Spares: fe.opts.Spares,
		Slots: fe.slots, Oversubscribe: fe.opts.Oversubscribe, MPI: proto.MPIName(fe.opts.MPI)}
	names := alloc.LocalNodes(fe.opts.TestNodes) // the nodes that may host replicas
	if fe.opts.Placement != nil {
		names = names[:0]
		for _, n := range fe.opts.Placement.Nodes {
			names = append(names, n.Name)
		}
	}
	ip := "127.0.0.1"
	if addrs := proto.OwnAddrs(); fe.opts.Agents.Remote() && len(addrs) > 0 {
		ip = addrs[0]
	}
	creds := func() (*secure.Credentials, error) {
		err := fe.issueRoot()
		return fe.rootCreds, err
	}
	remote := fe.opts.Agents.Remote() || fe.opts.TestNodes > 1
	cfg, tr, err := journal.FrontEndConfig(ctx, fe.opts.StateDir, cmp.Or(host, "localhost"), job, names, remote, creds, ip, agentsExitWait)
	if fe.hooks.breakAt == loseLeadHook {
		// The blip of a loaded machine, in short: the lead is lost at the
		// recovery's first commit, and comes back later than an unwatched
		// writer would wait (Regain, 10 s there).
		cfg.LoseLeadAt, cfg.Regain = recovery.StageSuspend.String(), 100*time.Millisecond
	}
	return cfg, tr, err
}

// addReplica adds a replica agent to the group, from a goroutine: the
// journal's Join waits for the front-end's replica to lead, and refuses
// once the job's end is being committed (the replica then never joined,
// as docs/state.md says); the end waits for a join under way. replaces is
// the raft ID of a lost voter it takes the place of ("": none), removed
// first.
func (fe *frontend) addReplica(ru proto.ReplicaUp, replaces string) {
	fe.goFunc(func() {
		joined := fe.journal.AddReplica(fe.ctx, ru.Name, ru.Addr, replaces, fe.warnf, fe.verbosef)
		fe.put(evReplicaDone{name: ru.Name, joined: joined}) // joined or not, the end need not wait for it
	})
}

// refillGroup is a successor root's: the front-end's voter is gone, so
// the agent the planner chose (recovery.RefillGroup), which hosts no
// replica, is asked to host one in its place (MHostReplica): the group
// keeps its size, and survives the loss of this root too. With no agent
// to ask, the group goes on with one voter less.
func (fe *frontend) refillGroup(act recovery.RefillGroup) {
	if fe.status().Ending() {
		return
	}
	names := map[string]bool{}
	for _, a := range fe.agents {
		names[a.name] = true
	}
	gone, servers := fe.journal.LostVoter(names) // the front-end's voter: the one that is no agent's
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
