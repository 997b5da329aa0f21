package launcher

import (
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// TestAgentsSpec: what an interior agent is told to start its children
// with, and how the state log names the agents' starts, by how the
// front-end starts its own.
func TestAgentsSpec(t *testing.T) {
	ls, err := NewLocalSpawner()
	if err != nil {
		t.Fatal(err)
	}
	ssh := Agents{Path: "/ft", Spawner: ls, Launcher: "ssh", Batch: 8, SSHConfig: "/cfg", SSHAcceptNew: true, SSHForwardAgent: true}
	slurm := Agents{Path: "/ft", Spawner: ls, Launcher: "slurm", Batch: 8, SSHConfig: "/cfg"}
	for _, c := range []struct {
		name string
		g    Agents
		leaf bool
		want proto.LaunchSpec
		by   string
	}{
		{"test nodes", Agents{Path: "/ft", Batch: 8}, false, proto.LaunchSpec{Mode: "local", AgentPath: "/ft"}, journal.StartProcess},
		{"test nodes, a leaf launcher", Agents{Path: "/ft", Batch: 8}, true, proto.LaunchSpec{Mode: "local", AgentPath: "/ft", Batch: 8}, journal.StartProcess},
		{"ssh", ssh, true, proto.LaunchSpec{Mode: "ssh", AgentPath: "/ft", SSHConfig: "/cfg", AcceptNew: true, ForwardAgent: true, Batch: 8}, journal.StartSSH},
		{"srun", slurm, false, proto.LaunchSpec{Mode: "slurm", AgentPath: "/ft"}, journal.StartSrun},
	} {
		if got := c.g.Spec(c.leaf); got != c.want {
			t.Errorf("%s: spec %+v, want %+v", c.name, got, c.want)
		}
		if got := c.g.StartedBy(); got != c.by {
			t.Errorf("%s: started by %q, want %q", c.name, got, c.by)
		}
	}
}
