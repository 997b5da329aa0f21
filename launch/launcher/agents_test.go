package launcher

import (
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/topology/plan"
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

// TestTreeKind: one srun step for every agent makes the tree flat (the
// front-end starts them all); every other way keeps the kind asked (""
// is auto); a kind that does not parse is --tree's error.
func TestTreeKind(t *testing.T) {
	ls, err := NewLocalSpawner()
	if err != nil {
		t.Fatal(err)
	}
	kary, err := plan.ParseKind("kary:4")
	if err != nil {
		t.Fatal(err)
	}
	flat, _ := plan.ParseKind("flat")
	auto, _ := plan.ParseKind("auto")
	for _, c := range []struct {
		name string
		g    Agents
		tree string
		want plan.Kind
		flat bool
	}{
		{"srun, one step for all", Agents{Spawner: ls, Launcher: "slurm", GroupStart: true}, "kary:4", flat, true},
		{"srun, one step for all, flat asked", Agents{Spawner: ls, Launcher: "slurm", GroupStart: true}, "flat", flat, false},
		{"srun, a step per agent", Agents{Spawner: ls, Launcher: "slurm"}, "kary:4", kary, false},
		{"ssh", Agents{Spawner: ls, Launcher: "ssh", GroupStart: true}, "kary:4", kary, false},
		{"ssh, none asked", Agents{Spawner: ls, Launcher: "ssh"}, "", auto, false},
		{"test nodes", Agents{GroupStart: true}, "kary:4", kary, false},
	} {
		if got, f, err := c.g.TreeKind(c.tree); err != nil || got != c.want || f != c.flat {
			t.Errorf("%s: %v (flat %v, %v), want %v (%v)", c.name, got, f, err, c.want, c.flat)
		}
	}
	if _, _, err := (Agents{}).TreeKind("nosuch"); err == nil {
		t.Error("--tree nosuch: no error")
	}
}

// TestAgentsModel: how the launch-time model takes a launch, by how the
// front-end starts its agents: only one-by-one starts on other hosts are
// kept in the calibration.
func TestAgentsModel(t *testing.T) {
	ls, err := NewLocalSpawner()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		g           Agents
		by          string
		local, keep bool
	}{
		{"ssh", Agents{Spawner: ls, Launcher: "ssh"}, journal.StartSSH, false, true},
		{"srun, a step per agent", Agents{Spawner: ls, Launcher: "slurm"}, journal.StartSrun, false, true},
		{"srun, one step for all", Agents{Spawner: ls, Launcher: "slurm", GroupStart: true}, journal.StartSrun, false, false},
		{"test nodes", Agents{}, journal.StartProcess, true, false},
	} {
		m := c.g.Model(8, nil, nil)
		if m.Launcher != c.g.Launcher || m.StartedBy != c.by || m.Local != c.local || m.Keep != c.keep || m.Ranks != 8 {
			t.Errorf("%s: %+v, want started by %s, local %v, kept %v", c.name, m, c.by, c.local, c.keep)
		}
	}
}

// TestAgentsOwnAddr: local agents reach the front-end on loopback, remote
// ones at one of this machine's own addresses.
func TestAgentsOwnAddr(t *testing.T) {
	ls, err := NewLocalSpawner()
	if err != nil {
		t.Fatal(err)
	}
	if got := (Agents{}).OwnAddr(); got != "127.0.0.1" {
		t.Errorf("local agents: %s, want loopback", got)
	}
	own := proto.OwnAddrs()
	if got := (Agents{Spawner: ls}).OwnAddr(); len(own) > 0 && got != own[0] || len(own) == 0 && got != "127.0.0.1" {
		t.Errorf("remote agents: %s, this machine's addresses %v", got, own)
	}
}

// TestIssueRoot: the front-end's credentials are the root's, of the job,
// issued by the job's CA (which issues the agents' too).
func TestIssueRoot(t *testing.T) {
	ca, creds, err := IssueRoot("ft-1")
	if err != nil {
		t.Fatal(err)
	}
	if ca.JobID() != "ft-1" || creds.JobID() != "ft-1" || creds.Name() != proto.RootName {
		t.Fatalf("CA of job %q, credentials of %q for %q; want job ft-1, %s", ca.JobID(), creds.JobID(), creds.Name(), proto.RootName)
	}
	if _, _, err := IssueRoot(""); err == nil {
		t.Fatal("a job without an ID: no error")
	}
}
