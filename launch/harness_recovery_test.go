package launch

// Recovery on the in-process harness (nodes_test.go, harness_test.go):
// each test breaks something of a running job under --restart rank, waits
// on the root's typed events, and checks what the state log says of the
// job's end. None of them waits on real heartbeat time: a silent node is
// declared lost on the test timing (testTiming).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/launch/root"
)

// A rank's failure under --restart rank: the restart protocol starts it
// again as its next incarnation on its node, every other rank goes on,
// and the job completes.
func TestHarnessRankRestart(t *testing.T) {
	hosts := []string{"nodeA", "nodeB"}
	j := runOnNodes(t, hosts, 2, recoverOpts("rank:1"), nil)
	rep := checkCompleted(t, j, 4)
	evs := j.obs.untilEnd()
	if n := count(evs, func(e root.RankRestarted) bool { return e.Rank == 1 && e.Inc == 2 }); n != 1 {
		t.Errorf("%d restarts of rank 1 as incarnation 2; events %v", n, evs)
	}
	if n := count[root.RankRestarted](evs, nil); n != 1 {
		t.Errorf("%d ranks restarted, want 1; events %v", n, evs)
	}
	if count(evs, func(e root.Recovered) bool { return e.Stage == "resumed" }) != 1 || count[root.AgentLost](evs, nil) != 0 {
		t.Errorf("events %v", evs)
	}
	for _, r := range j.state.Ranks {
		if want := uint64(1) + uint64(boolInt(r.Rank == 1)); r.Incarnation != want || r.Node != hosts[r.Rank/2] {
			t.Errorf("rank %d: incarnation %d on %s, want %d on %s", r.Rank, r.Incarnation, r.Node, want, hosts[r.Rank/2])
		}
	}
	if len(rep.Recoveries) != 1 || rep.Recoveries[0].Rank != 1 || rep.Recoveries[0].NewIncarnation != 2 {
		t.Errorf("recoveries %+v", rep.Recoveries)
	}
}

// A rank that fails before any rank opened the rank protocol is started
// again alone (the others go on, unsuspended); its new incarnation joins
// the job's first Publish as any rank does, and the job completes. (It
// once took the respawned rank's way, its Publish held for a resume that
// an alone recovery never sends: the job hung.)
func TestHarnessRankRestartAloneBeforeTable(t *testing.T) {
	hosts := []string{"nodeA", "nodeB"}
	gate := filepath.Join(t.TempDir(), "gate")
	opts := recoverOpts("early:1")
	opts.Env = append(opts.Env, gateEnv+"="+gate)
	j := runOnNodes(t, hosts, 2, opts, func(j *nodesJob) {
		if _, err := j.obs.wait(j.ctx, is(func(e root.RankRestarted) bool { return e.Rank == 1 && e.Inc == 2 })); err != nil {
			return
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Error(err)
		}
	})
	rep := checkCompleted(t, j, 4)
	evs := j.obs.untilEnd()
	if n := count[root.RankRestarted](evs, nil); n != 1 {
		t.Errorf("%d ranks restarted, want 1; events %v", n, evs)
	}
	if count(evs, func(e root.Recovered) bool { return e.Stage == "resumed" }) != 0 {
		t.Errorf("an alone restart suspended and resumed the job: events %v", evs)
	}
	if len(rep.Recoveries) != 1 || rep.Recoveries[0].Rank != 1 || rep.Recoveries[0].NewIncarnation != 2 {
		t.Errorf("recoveries %+v", rep.Recoveries)
	}
}

// A lost agent (killed: its link ends at once, then its goroutine's
// context is cancelled and it kills its ranks) is started again on its
// node as incarnation 2; its ranks are respawned, the others resume, and
// the job completes.
func TestHarnessAgentRelaunch(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC"}
	j := runOnNodes(t, hosts, 2, recoverOpts("node:nodeB"), func(j *nodesJob) {
		if _, err := j.obs.wait(j.ctx, is[root.TablePublished](nil)); err != nil {
			return
		}
		j.sp.agent("nodeB").kill()
	})
	checkCompleted(t, j, 6)
	evs := j.obs.untilEnd()
	if count(evs, func(e root.AgentLost) bool { return e.Node == "nodeB" && e.Inc == 1 && !e.Silent }) != 1 ||
		count(evs, func(e root.AgentRelaunched) bool { return e.Node == "nodeB" && e.Inc == 2 }) != 1 ||
		count(evs, func(e root.Recovered) bool { return e.Stage == "resumed" }) != 1 {
		t.Errorf("events %v", evs)
	}
	for _, r := range j.state.Ranks {
		want := uint64(1)
		if r.Node == "nodeB" {
			want = 2
		}
		if r.Incarnation != want || r.Node != hosts[r.Rank/2] {
			t.Errorf("rank %d: incarnation %d on %s", r.Rank, r.Incarnation, r.Node)
		}
	}
	if a := j.state.Agents["nodeB"]; a.Incarnation != 2 {
		t.Errorf("nodeB's agent: %+v", a)
	}
}

// An interior agent lost (nodeA, a child of the root with nodeC and nodeD
// below it: kary:2 on six nodes): its children move to their backup
// parents with their ranks running, it starts again as a child of the
// root, its own rank alone is respawned, and the job completes.
func TestHarnessReparent(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC", "nodeD", "nodeE", "nodeF"}
	opts := recoverOpts("node:nodeA")
	opts.Tree = "kary:2"
	j := runOnNodes(t, hosts, 1, opts, func(j *nodesJob) {
		if _, err := j.obs.wait(j.ctx, is[root.TablePublished](nil)); err != nil {
			return
		}
		// nodeC and nodeD can move only once their standby links are up
		// (before, the root is their fallback).
		if _, err := j.obs.wait(j.ctx, is(func(e root.StandbysUp) bool { return e.N == 4 })); err != nil {
			return
		}
		j.sp.agent("nodeA").kill()
	})
	checkCompleted(t, j, 6)
	evs := j.obs.untilEnd()
	parent := map[string]string{}
	for _, n := range j.state.Plan.Nodes {
		parent[n.Name] = n.Primary
	}
	for _, moved := range []string{"nodeC", "nodeD"} {
		if n := count(evs, func(e root.Reparented) bool {
			return e.Node == moved && e.Parent != "nodeA" && e.Parent != "" && e.Parent == parent[moved]
		}); n != 1 {
			t.Errorf("%s moved %d times to its backup parent (its parent in the plan: %q); events %v", moved, n, parent[moved], evs)
		}
	}
	if parent["nodeA"] != proto.RootName {
		t.Errorf("nodeA's parent in the plan: %q, not the root", parent["nodeA"])
	}
	if count(evs, func(e root.AgentLost) bool { return e.Node == "nodeA" && e.Inc == 1 }) != 1 ||
		count(evs, func(e root.AgentRelaunched) bool { return e.Node == "nodeA" && e.Inc == 2 }) != 1 ||
		count[root.RankRestarted](evs, nil) != 1 || count[root.Reparented](evs, nil) != 2 {
		t.Errorf("events %v", evs)
	}
	for _, r := range j.state.Ranks {
		if want := uint64(1 + boolInt(r.Node == "nodeA")); r.Incarnation != want {
			t.Errorf("rank %d on %s: incarnation %d, want %d", r.Rank, r.Node, r.Incarnation, want)
		}
	}
}

// A collective interrupted by an interior agent's loss under --restart
// rank (issue #32's acceptance): on kary:2 over six nodes of two ranks,
// every rank but nodeA's is in the ring exchange, waiting for nodeA's
// ranks, when nodeA (a child of the root, above nodeC and nodeD) is lost.
// Its children move to their backup parents with their parts, the
// recovery abandons the ring and starts nodeA again, and the ring, called
// again under the recovery's epoch, gives every rank its neighbours'
// values, the new incarnations' for nodeA's ranks; the allgather after it
// sums right.
func TestHarnessRingInterruptedByInteriorLoss(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC", "nodeD", "nodeE", "nodeF"}
	opts := recoverOpts("node:nodeA")
	opts.Tree = "kary:2"
	opts.Env = []string{rankRoleEnv + "=ringrecover", victimEnv + "=node:nodeA"}
	n := 2 * len(hosts)
	j := runOnNodes(t, hosts, 2, opts, func(j *nodesJob) {
		if _, err := j.obs.wait(j.ctx, is(func(e root.StandbysUp) bool { return e.N == 4 })); err != nil {
			return
		}
		// Every rank but nodeA's two is in the ring: their calls reached
		// their agents.
		if err := j.sp.joins.waitAll(j.ctx, rankproto.OpRing, hosts[1:]...); err != nil {
			return
		}
		j.sp.agent("nodeA").kill()
	})
	checkCompleted(t, j, n)
	evs := j.obs.untilEnd()
	if count(evs, func(e root.AgentLost) bool { return e.Node == "nodeA" && e.Inc == 1 }) != 1 ||
		count(evs, func(e root.AgentRelaunched) bool { return e.Node == "nodeA" && e.Inc == 2 }) != 1 ||
		count(evs, func(e root.Reparented) bool { return e.Node == "nodeC" || e.Node == "nodeD" }) != 2 {
		t.Errorf("events %v", evs)
	}
	inc := func(r int) int { return 1 + boolInt(r/2 == 0) } // nodeA's ranks, 0 and 1, started again
	for r := range n {
		l, rr := (r-1+n)%n, (r+1)%n
		want := fmt.Sprintf("[%d] rank%d incarnation %d ring rank%d.%d rank%d.%d sum %d\n", r, r, inc(r), l, inc(l), rr, inc(rr), sumOf(n))
		if !strings.Contains(j.stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, j.stdout.String())
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A silent node (nodeB's link to the root stops carrying anything, in
// both directions, and stays open: a stopped or cut-off node) is declared
// lost on the heartbeat's timeout (the test timing: about a second, not
// 5 s), fenced, and its agent starts on the spare nodeS as incarnation 2;
// its ranks run there, the job completes.
func TestHarnessSpare(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC"}
	opts := recoverOpts("node:nodeB")
	opts.Spares = []string{"nodeS"}
	testTiming(&opts)
	j := runOnNodes(t, hosts, 2, opts, func(j *nodesJob) {
		if _, err := j.obs.wait(j.ctx, is[root.TablePublished](nil)); err != nil {
			return
		}
		j.sp.agent("nodeB").proxy.hush()
	})
	checkCompleted(t, j, 6)
	evs := j.obs.untilEnd()
	if count(evs, func(e root.AgentLost) bool { return e.Node == "nodeB" && e.Inc == 1 && e.Silent }) != 1 ||
		count(evs, func(e root.AgentRelaunched) bool { return e.Node == "nodeS" && e.Inc == 2 }) != 1 ||
		count[root.RankRestarted](evs, nil) != 2 {
		t.Errorf("events %v", evs)
	}
	for _, r := range j.state.Ranks {
		want, node := uint64(1), hosts[r.Rank/2]
		if node == "nodeB" {
			want, node = 2, "nodeS"
		}
		if r.Incarnation != want || r.Node != node {
			t.Errorf("rank %d: incarnation %d on %s, want %d on %s", r.Rank, r.Incarnation, r.Node, want, node)
		}
	}
}

// Both children of the root lost together (kary:2 on six nodes: nodeA
// above nodeC and nodeD, nodeB above nodeE and nodeF, each the other's
// children's backup): no orphan has a backup left, so each falls back to
// its grandparent, the root, with its ranks running; nodeA and nodeB
// start again as children of the root and only their ranks are respawned.
func TestHarnessReparentToRoot(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC", "nodeD", "nodeE", "nodeF"}
	opts := recoverOpts("node:nodeA")
	opts.Tree = "kary:2"
	opts.Env = append(opts.Env, victimEnv+"2=node:nodeB")
	j := runOnNodes(t, hosts, 1, opts, func(j *nodesJob) {
		if _, err := j.obs.wait(j.ctx, is(func(e root.StandbysUp) bool { return e.N == 4 })); err != nil {
			return
		}
		if _, err := j.obs.wait(j.ctx, is[root.TablePublished](nil)); err != nil {
			return
		}
		j.sp.agent("nodeA").kill()
		j.sp.agent("nodeB").kill()
	})
	checkCompleted(t, j, 6)
	evs := j.obs.untilEnd()
	for _, moved := range []string{"nodeC", "nodeD", "nodeE", "nodeF"} {
		if n := count(evs, func(e root.Reparented) bool { return e.Node == moved && e.Parent == "" }); n != 1 {
			t.Errorf("%s moved %d times to the root; events %v", moved, n, evs)
		}
	}
	for _, lost := range []string{"nodeA", "nodeB"} {
		if count(evs, func(e root.AgentLost) bool { return e.Node == lost && e.Inc == 1 }) != 1 ||
			count(evs, func(e root.AgentRelaunched) bool { return e.Node == lost && e.Inc == 2 }) != 1 {
			t.Errorf("%s: events %v", lost, evs)
		}
	}
	if count[root.RankRestarted](evs, nil) != 2 || count[root.AgentLost](evs, nil) != 2 {
		t.Errorf("events %v", evs)
	}
	for _, n := range j.state.Plan.Nodes {
		if n.Name != proto.RootName && n.Primary != proto.RootName {
			t.Errorf("%s's parent in the plan: %q, not the root", n.Name, n.Primary)
		}
	}
	for _, r := range j.state.Ranks {
		if want := uint64(1 + boolInt(r.Node == "nodeA" || r.Node == "nodeB")); r.Incarnation != want {
			t.Errorf("rank %d on %s: incarnation %d, want %d", r.Rank, r.Node, r.Incarnation, want)
		}
	}
}

// A replica agent's host loses its agent under --replicas 3: the agent is
// started again and its replica joins the group again; the live report
// counts the agents up now (not every start: "4 of 3 up") and names each
// replica that joined once.
func TestHarnessReplicaRelaunchLive(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC"}
	release := filepath.Join(t.TempDir(), "release")
	opts := recoverOpts("wait:" + release)
	opts.Replicas = 3
	testTiming(&opts)
	var live *journal.Live
	j := runOnNodes(t, hosts, 2, opts, func(j *nodesJob) {
		defer os.WriteFile(release, nil, 0o600) // the ranks go on, whatever happened
		first, err := groupUp(j)
		if err != nil {
			return
		}
		victim := first.Node
		j.sp.agent(victim).kill()
		if _, err := j.obs.wait(j.ctx, is(func(e root.ReplicaJoined) bool { return e.Node == victim })); err != nil {
			return
		}
		if _, err := j.obs.wait(j.ctx, is(func(e root.Recovered) bool { return e.Stage == "resumed" })); err != nil {
			return
		}
		joined := time.Now()
		for j.ctx.Err() == nil {
			jobDir, _ := journal.Latest(j.stateDir)
			if l, err := journal.ReadLive(jobDir); err == nil && l.Updated.After(joined) {
				live = l
				return
			}
			time.Sleep(20 * time.Millisecond) // polling a condition: the next live report
		}
	})
	checkCompleted(t, j, 6)
	if live == nil {
		t.Fatalf("no live report after the replica joined again; events %v", j.obs.untilEnd())
	}
	seen := map[string]bool{}
	for _, n := range live.ReplicasJoined {
		if seen[n] {
			t.Errorf("replica %s named twice as joined: %v", n, live.ReplicasJoined)
		}
		seen[n] = true
	}
	if live.AgentsUp != live.Agents || live.Agents != 3 {
		t.Errorf("live report: %d of %d agents up, want 3 of 3", live.AgentsUp, live.Agents)
	}
}

// joins records, by host, the collectives whose every local rank's call
// reached the host's in-process agent (agent.ConnectConfig.Joined): a
// test waits on it for ranks to be inside a collective, as the root
// cannot tell while their parts wait at an interior agent.
type joins struct {
	mu      sync.Mutex
	ops     map[string][]rankproto.Op // by host, as they came
	changed chan struct{}             // closed (and replaced) at every one
}

func newJoins() *joins {
	return &joins{ops: map[string][]rankproto.Op{}, changed: make(chan struct{})}
}

// of is the agent of host's ConnectConfig.Joined: it never blocks.
func (js *joins) of(host string) func(seq uint64, op rankproto.Op) {
	return func(_ uint64, op rankproto.Op) {
		js.mu.Lock()
		defer js.mu.Unlock()
		js.ops[host] = append(js.ops[host], op)
		close(js.changed)
		js.changed = make(chan struct{})
	}
}

// waitAll waits until the ranks of each of hosts all called a collective
// op, or ctx ends.
func (js *joins) waitAll(ctx context.Context, op rankproto.Op, hosts ...string) error {
	for {
		js.mu.Lock()
		missing := slices.DeleteFunc(slices.Clone(hosts), func(h string) bool { return slices.Contains(js.ops[h], op) })
		changed := js.changed
		js.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("the ranks of %v did not all call %v: %w", missing, op, ctx.Err())
		}
	}
}
