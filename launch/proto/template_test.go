package proto

import (
	"reflect"
	"testing"
	"time"
)

// TestNodeSpecTemplate: the template keeps what every agent is told of the
// job and leaves out what one node, the tree, the replica group, the
// gossip cluster and prestaging told this one.
func TestNodeSpecTemplate(t *testing.T) {
	job := NodeSpec{
		JobID: "j", Argv: []string{"./a"}, Env: []string{"A=1"}, Wdir: "/w", Size: 8, KillAfter: time.Second, Heartbeat: time.Second,
		ProcessMapping: "(vector,(0,2,4))", Launch: LaunchSpec{Mode: "ssh", AgentPath: "/ft", Batch: 4},
		Apps: []App{{N: 8, Argv: []string{"./a"}}}, Bind: "core", BindShare: true, Restart: "rank",
		Timing: Timing{Slack: 3 * time.Second}, MPI: "pmix", RootMerge: true,
	}
	node := job
	node.Node, node.NodeID, node.Ranks, node.Tree, node.Prestage = "n1", 1, []int{2, 3}, true, true
	node.Children = []ChildSpec{{Idx: 3, Name: "n3"}}
	node.Replica = ReplicaSpec{JobDir: "/state/j", Replicas: 3}
	node.Addr, node.Survive, node.RootChild = "10.0.0.1", true, true
	node.Relaunch = &RelaunchSpec{}
	node.Gossip = &GossipSpec{Port: 7946}
	if got := node.Template(); !reflect.DeepEqual(got, job) {
		t.Fatalf("template of %+v:\n got %+v\nwant %+v", node, got, job)
	}
}
