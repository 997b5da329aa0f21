package recovery

import (
	"reflect"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// TestStandbysUpOnceEveryBackupIsHeld: the planner says every standby
// link is up (StandbysUp) when the last agent with a backup parent holds
// its link to the backup the tree has now; a link to another agent, or
// one said again, says nothing.
func TestStandbysUpOnceEveryBackupIsHeld(t *testing.T) {
	p := lossPlanner(t, Rank) // backups: n2, n3 → n1; n4, n5 → n0; n6 → n3
	steps := []struct {
		ev   BackupUp
		want []Action
	}{
		{BackupUp{Agent: 2, Backup: 1}, nil},
		{BackupUp{Agent: 3, Backup: 1}, nil},
		{BackupUp{Agent: 4, Backup: 0}, nil},
		{BackupUp{Agent: 5, Backup: 0}, nil},
		{BackupUp{Agent: 6, Backup: 2}, nil}, // not its backup
		{BackupUp{Agent: 6, Backup: 3}, []Action{StandbysUp{N: 5}}},
		{BackupUp{Agent: 6, Backup: 3}, []Action{StandbysUp{N: 5}}}, // said again: as the root heard it
	}
	for i, s := range steps {
		if got := p.Step(s.ev); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d %+v: %+v, want %+v", i, s.ev, got, s.want)
		}
	}
	if links, missing := p.Links().Standbys(); links != 5 || missing != nil {
		t.Fatalf("standbys: %d, missing %v", links, missing)
	}
}

// TestRedealTellsNewOrUnheldBackups: after a loss, the agents told their
// backup parent (Redeal.Tell) are those whose backup is new, or not the
// one they hold a standby link to; the others are told their fallbacks
// only.
func TestRedealTellsNewOrUnheldBackups(t *testing.T) {
	p := lossPlanner(t, Rank)
	for _, ev := range []BackupUp{{Agent: 2, Backup: 1}, {Agent: 3, Backup: 1}, {Agent: 4, Backup: 0}, {Agent: 5, Backup: 0}} {
		p.Step(ev)
	}
	// n6 (below n2, backup n3) lost: n2's and n3's backups stay n1, held;
	// n4's and n5's stay n0, held; n6 starts again under the root.
	var rd Redeal
	for _, a := range p.Step(LinkLost{Agent: 6, Err: "gone"}) {
		if r, ok := a.(Redeal); ok {
			rd = r
		}
	}
	tr := p.cfg.Tree
	for a := range 7 {
		held := p.links[a].backup
		told := containsInt(rd.Tell, a)
		if want := tr.Backup(a) >= 0 && tr.Backup(a) != held; told != want {
			t.Errorf("n%d (backup %d, holds %d): told %v, want %v", a, tr.Backup(a), held, told, want)
		}
	}
	if !reflect.DeepEqual(rd.Rerooted, []int{6}) {
		t.Fatalf("redeal %+v", rd)
	}
}

// TestLaunchFailedLosesItsSubtree: an agent that could not be started is
// closed with the agents below it, which never ran (LoseSubtree with why,
// no fence), and the job ends; while it is ending, they are closed all
// the same.
func TestLaunchFailedLosesItsSubtree(t *testing.T) {
	for _, c := range []struct {
		name   string
		before []Event
		want   []Action
	}{
		{"the job ends", nil, []Action{
			LoseSubtree{Closed: []int{2, 6}, Lost: []int{2, 6}, NeverStarted: "ssh: refused", Abandoned: []int{2, 6}},
			Record{Why: Reason{Kind: ReasonLaunch, Rank: NoRank, Node: "n2", Text: "ssh: refused"}, Node: "n2", Rank: NoRank},
			Report{Why: Reason{Kind: ReasonLaunch, Rank: NoRank, Node: "n2", Text: "ssh: refused"}}, Terminate{}}},
		{"while the job ends: closed only", []Event{TimedOut{Limit: time.Second}}, []Action{
			LoseSubtree{Closed: []int{2, 6}, Lost: []int{2, 6}, NeverStarted: "ssh: refused", Abandoned: []int{2, 6}, Ending: true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := lossPlanner(t, Rank)
			p.haveLink(2, AgentLink{})
			p.haveLink(6, AgentLink{})
			for _, ev := range c.before {
				p.Step(ev)
			}
			if got := p.Step(LaunchFailed{Agent: 2, Node: "n2", Msg: "ssh: refused"}); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
			if l := p.Links().Link(6); !l.Closed {
				t.Fatalf("n6's link %+v, want closed", l)
			}
		})
	}
}

// TestFallbackParents: the parents an agent is told to try beyond its
// backup: its grandparent while its link is up and open, then the root;
// never its backup (it holds a standby link to it).
func TestFallbackParents(t *testing.T) {
	for _, c := range []struct {
		name  string
		agent int
		n0    AgentLink // the grandparent's link (of n6; n2's is n0 as well)
		want  []int
	}{
		{"grandparent up", 6, AgentLink{Up: true}, []int{0, topology.Root}},
		{"grandparent not up yet", 6, AgentLink{}, []int{topology.Root}},
		{"grandparent lost", 6, AgentLink{Up: true, Closed: true}, []int{topology.Root}},
		{"a child of the root's child: its backup is left out", 2, AgentLink{Up: true}, []int{topology.Root}},
		{"a child of the root: the root", 0, AgentLink{Up: true}, []int{topology.Root}},
	} {
		p := lossPlanner(t, Rank)
		p.haveLinks(upLinks())
		p.haveLink(0, c.n0)
		if got := p.Links().Fallbacks(c.agent); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRedealtTellsBackupsOrFallbacks: after a committed redeal, each agent
// with a backup whose link is live is told its backup if the redeal names
// it and the backup's link is live, else its fallbacks; an orphan on its
// way, an agent not live and one without a backup are told nothing.
func TestRedealtTellsBackupsOrFallbacks(t *testing.T) {
	p := lossPlanner(t, Rank)
	ls := upLinks()
	ls[5].Closed = true // n5: lost
	ls[1].Done = true   // n1, the backup of n2 and n3: done
	p.haveLinks(ls)
	got := p.Links().Redealt(Redeal{Tell: []int{2, 4, 6}, Orphaned: []int{3}})
	want := []Told{{Agent: 2}, {Agent: 4, Backup: true}, {Agent: 6, Backup: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("told %+v, want %+v", got, want)
	}
}

// TestBackupsOnUp: an agent that comes up is told its backup if the
// backup is up, and the agents up and open whose backup it is are told
// theirs (it now listens for their standby links).
func TestBackupsOnUp(t *testing.T) {
	for _, c := range []struct {
		name  string
		agent int
		links func([]AgentLink)
		want  []int
	}{
		{"n0 up: n4 and n5 back up to it", 0, func([]AgentLink) {}, []int{4, 5}},
		{"n0 up, n5 lost", 0, func(ls []AgentLink) { ls[5].Closed = true }, []int{4}},
		{"n6 up: its backup n3 is up", 6, func([]AgentLink) {}, []int{6}},
		{"n6 up: its backup n3 is not", 6, func(ls []AgentLink) { ls[3].Up = false }, nil},
		{"n2 up: its backup n1, and n6 backs up to n3, not it", 2, func([]AgentLink) {}, []int{2}},
	} {
		p := lossPlanner(t, Rank)
		ls := upLinks()
		c.links(ls)
		p.haveLinks(ls)
		if got := p.Links().BackupsOnUp(c.agent); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLaunchFailedStale: the failure of a start is stale for an agent
// that is up after all, or whose link was closed already (lost with its
// parent, or the job's end): nothing is closed, the job goes on.
func TestLaunchFailedStale(t *testing.T) {
	for _, l := range []AgentLink{{Up: true}, {Closed: true}, {Up: true, Closed: true}} {
		p := lossPlanner(t, Rank)
		p.haveLink(2, l)
		p.haveLink(6, AgentLink{})
		if got := p.Step(LaunchFailed{Agent: 2, Node: "n2", Msg: "ssh: refused"}); len(got) != 0 {
			t.Errorf("%+v: %+v, want nothing", l, got)
		}
		if p.Links().Link(6).Closed || p.Status().Failure != nil {
			t.Errorf("%+v: n6 closed or the job failed: %+v", l, p.Status().Failure)
		}
	}
}

// TestLinkOfAnAgentStartedAgain: an agent's loss closes the link of the
// incarnation lost (an older one's loss closes nothing); the Relaunch of
// its next incarnation starts a new link, the root's own (adopted), not up
// until the root says so; a Relaunch committed again by a new leader for
// an incarnation the root holds starts nothing; a relaunch that failed
// closes it.
func TestLinkOfAnAgentStartedAgain(t *testing.T) {
	p := New(Config{Policy: Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second,
		TableReady: true, Nodes: []string{"n0", "n1"}, Up: allUp(2)})
	p.Step(AgentLost{Agent: 1, Incarnation: 0, Node: "n1", Err: "EOF"})
	if l := p.Links().Link(1); !l.Closed {
		t.Fatalf("after the loss: %+v", l)
	}
	p.Step(Committed{Epoch: 1, Stage: StageSuspend})
	acts := p.Step(Suspended{Agent: 0, Epoch: 1})
	acts = append(acts, p.Step(Committed{Epoch: 1, Stage: StageRelaunch})...)
	var rl Relaunch
	for _, a := range acts {
		if r, ok := a.(Relaunch); ok {
			rl = r
		}
	}
	if rl != (Relaunch{Agent: 1, Node: "n1", Incarnation: 2, Epoch: 1}) {
		t.Fatalf("relaunch %+v in %+v", rl, acts)
	}
	if l := p.Links().Link(1); !reflect.DeepEqual(l, AgentLink{Inc: 2, RootChild: false, Adopted: true}) {
		t.Fatalf("the new link %+v", l)
	}
	p.Step(AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "EOF"}) // the old one's, again
	if l := p.Links().Link(1); l.Closed {
		t.Fatalf("an older incarnation's loss closed the new link: %+v", l)
	}
	p.Step(AgentUp{Agent: 1})
	if l := p.Links().Link(1); !l.Live() {
		t.Fatalf("up: %+v", l)
	}
	// A new leader commits the stage again: the root holds incarnation 2.
	q := New(Config{Policy: Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second,
		TableReady: true, Nodes: []string{"n0", "n1"}, Resumed: true, Up: allUp(2)})
	q.Restore(Checkpoint{Epoch: 1, Stage: StageRelaunch, Agents: []AgentRecord{{Agent: 1, Node: "n1", Incarnation: 2, Restarts: 1}},
		Ranks: []RankRecord{{Rank: 1, Agent: 1, Incarnation: 1, Restarts: 1, Failed: true}}})
	acts = q.Step(LeaderChanged{})
	acts = append(acts, q.Step(Committed{Epoch: 2, Stage: StageRelaunch})...)
	for _, a := range acts {
		if r, ok := a.(Relaunch); ok {
			t.Fatalf("a new leader started incarnation 2 again: %+v", r)
		}
	}
	p.Step(RelaunchFailed{Agent: 1, Incarnation: 2, Msg: "gone"})
	if l := p.Links().Link(1); !l.Closed {
		t.Fatalf("after the failed relaunch: %+v", l)
	}
}
