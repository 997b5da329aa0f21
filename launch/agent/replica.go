package agent

// The replica role of an agent: the root replica it hosts for a job with
// --replicas 3 or 5 (launch/root/successor.go takes the root over from it).

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// agentReplica is a replica hosted by an agent.
type agentReplica struct {
	r     *raftstore.Replica
	tr    *raft.NetworkTransport
	layer *journal.RaftStream
}

// startReplica opens the agent's replica: it waits to be added by the
// leader. ip is the address the agent is reached at.
func (a *Agent) startReplica(ctx context.Context, ip string) (*agentReplica, error) {
	rs := a.replicaSpec()
	layer, err := journal.NewRaftStream(ctx, a.tree.creds, ip)
	if err != nil {
		return nil, err
	}
	tr := raftstore.NewTCPTransport(layer)
	r, err := raftstore.Open(raftstore.Config{
		StateDir: rs.JobDir, Name: a.spec.Node, Transport: tr,
		Timing: raftstore.DefaultTiming(rs.Replicas),
	})
	if err != nil {
		tr.Close()
		return nil, err
	}
	a.send(proto.MReplicaUp, proto.ReplicaUp{Name: a.spec.Node, Addr: layer.Addr().String()}.Encode())
	ar := &agentReplica{r: r, tr: tr, layer: layer}
	// A child of the root takes the root over when its replica leads and
	// the root is gone; a deeper agent (a successor's refill under
	// kary:2, launch/root's refillGroup) hands any leadership it wins on.
	a.goFunc(func() { a.watchLeadership(ctx, ar) })
	return ar, nil
}

// finalWait bounds how long a replica of a job that ended waits for the
// job's final status before it shuts down.
const finalWait = 2 * time.Second

// close shuts the replica down. After the job's end (jobOver: the root
// committed the final status before it told the agents), it first waits,
// at most finalWait, for that status to reach this replica: a replica that
// joined late may still be catching up, and would keep a log without it.
// openReplica starts this agent's root replica and keeps it as the
// agent's; one that cannot start is told to the root without an address
// (it does not wait for it) and nil is returned.
func (a *Agent) openReplica(ctx context.Context) *agentReplica {
	ar, err := a.startReplica(ctx, a.spec.Addr)
	if ar != nil {
		a.mu.Lock()
		a.fo.replica = ar
		a.mu.Unlock()
	}
	if err != nil {
		a.logf("root replica: %v", err)
		a.send(proto.MReplicaUp, proto.ReplicaUp{Name: a.spec.Node}.Encode())
	}
	return ar
}

func (ar *agentReplica) close(jobOver bool) {
	if jobOver {
		ar.awaitDone(finalWait, false)
	}
	_ = ar.r.Shutdown()
	_ = ar.tr.Close()
}

// awaitDone waits, at most limit, until the job's final status reached
// this replica. Unless the root said it joined the group, a replica that
// holds no entry was never added to it (the job ended before it could
// join: the root says so, and inspect names it) and waits for nothing. One
// that joined may hold none yet: a voter is added once a majority of the
// new group has its entry, before the leader has sent it the log
// (TestRootFailoverDuringRun: a successor's refill, joined 28 ms before
// the job's end, skipped its wait on an empty log and kept 16 of 20
// entries).
func (ar *agentReplica) awaitDone(limit time.Duration, joined bool) {
	if !joined && ar.r.Raft().LastIndex() == 0 {
		return
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		done := false
		ar.r.FSM().View(func(s *raftstore.State) { done = s.Status.Done })
		if done {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling the local FSM: raft has no apply notification
	}
}

// awaitFinalStatus holds an agent that was told the job is over until its
// replica (if it hosts one) has the job's final status, at most
// finalWait. The root names the replicas that joined its group
// (MShutdown): the leader (the front-end's replica, or a successor's, its
// agent's) lives until every agent said it is done, so a replica a
// heartbeat behind, or one that joined late and is still catching up,
// gets the end of the log before its leader shuts down.
func (a *Agent) awaitFinalStatus() {
	a.mu.Lock()
	ar := a.fo.replica
	a.mu.Unlock()
	if ar != nil {
		ar.awaitDone(finalWait, true)
	}
}

// replicaSpec is the root replica this agent hosts (JobDir "": none): its
// job's, or one a successor root gave it later (hostReplica).
func (a *Agent) replicaSpec() proto.ReplicaSpec {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fo.lateReplica != nil {
		return *a.fo.lateReplica
	}
	return a.spec.Replica
}

// hostReplica starts a root replica on a successor root's word: the group
// lost the front-end's voter, and this agent (a child of the root, or a
// deeper one) takes its place.
// The replica lives until the agent ends.
func (a *Agent) hostReplica(rs proto.ReplicaSpec) {
	a.mu.Lock()
	if a.tree == nil || a.spec.Replica.JobDir != "" || a.fo.lateReplica != nil || rs.JobDir == "" {
		a.mu.Unlock()
		return
	}
	a.fo.lateReplica = &rs
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		ar := a.openReplica(a.ctx)
		if ar == nil {
			return
		}
		<-a.ctx.Done()
		ar.close(a.jobOver.Load())
	}()
}
