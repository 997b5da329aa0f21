package recovery

import (
	"reflect"
	"testing"
	"time"
)

// TestSuccessorStartsAndGivesUpRootChildren: once its waits passed, a
// successor starts the lost root's children that were never up (not
// adopted, not lost), unless the job is ending, and gives up those that
// did not ask to be adopted; a front-end's planner decides neither. n0
// and n1 are children of the root, the others below them (lossTree).
func TestSuccessorStartsAndGivesUpRootChildren(t *testing.T) {
	adopted := AgentLink{Up: true, Inc: 1, Adopted: true}
	up := AgentLink{Up: true, Inc: 1}
	never := AgentLink{Inc: 1}
	for _, c := range []struct {
		name    string
		resumed bool
		ending  bool
		links   []AgentLink
		ev      Event
		want    []Action
	}{
		{"a child never up is started", true, false, []AgentLink{adopted, never, up, up, never, never, up}, StartDue{}, []Action{StartChildren{Agents: []int{1}}}},
		{"a child up, not adopted, is not started", true, false, []AgentLink{up, adopted, up, up, up, up, up}, StartDue{}, nil},
		{"none started once the job ends", true, true, []AgentLink{adopted, never, up, up, never, never, up}, StartDue{}, nil},
		{"a child lost is not started", true, false, []AgentLink{adopted, {Inc: 1, Closed: true}, up, up, up, up, up}, StartDue{}, nil},
		{"children not adopted are given up", true, false, []AgentLink{up, never, up, up, up, up, up}, AdoptDue{}, []Action{Unadopted{Agents: []int{0, 1}}}},
		{"every child adopted or lost: none", true, false, []AgentLink{adopted, {Up: true, Inc: 1, Closed: true}, up, up, up, up, up}, AdoptDue{}, nil},
		{"a front-end decides neither", false, false, []AgentLink{up, never, up, up, up, up, up}, AdoptDue{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := lossPlanner(t, Rank)
			p.cfg.Resumed = c.resumed
			p.haveLinks(c.links)
			if c.ending {
				p.Step(TimedOut{Limit: time.Second})
			}
			if got := p.Step(c.ev); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestSuccessorProbesReplicaHosts: before it starts any, a successor
// probes the replica hosts among the lost root's children that did not
// ask to be adopted, not its own agent's, even while the job ends.
func TestSuccessorProbesReplicaHosts(t *testing.T) {
	up, never := AgentLink{Up: true, Inc: 1}, AgentLink{Inc: 1}
	adopted := AgentLink{Up: true, Inc: 1, Adopted: true}
	for _, c := range []struct {
		name   string
		ending bool
		links  []AgentLink
		want   []Action
	}{
		{"a replica host not adopted, this root's own not", false, []AgentLink{up, up, up, up, up, up, up}, []Action{ProbePeers{Agents: []int{1}}}},
		{"adopted: not probed", false, []AgentLink{up, adopted, up, up, up, up, up}, nil},
		{"probed, then started", false, []AgentLink{adopted, never, up, up, up, up, up}, []Action{ProbePeers{Agents: []int{1}}, StartChildren{Agents: []int{1}}}},
		{"probed while the job ends, not started", true, []AgentLink{adopted, never, up, up, up, up, up}, []Action{ProbePeers{Agents: []int{1}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := lossPlanner(t, Rank)
			p.cfg.Resumed, p.cfg.ReplicaHosts, p.cfg.RootNode = true, []int{0, 1, 3}, "n0" // n3: not a child of the root
			p.haveLinks(c.links)
			if c.ending {
				p.Step(TimedOut{Limit: time.Second})
			}
			if got := p.Step(StartDue{}); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestSuccessorLosesGonePeersAtOnce: the children of the lost root whose
// replica agent is gone (their process ended) are lost at once, not this
// root's own, not one adopted or lost already.
func TestSuccessorLosesGonePeersAtOnce(t *testing.T) {
	up, adopted := AgentLink{Up: true, Inc: 1}, AgentLink{Up: true, Inc: 1, Adopted: true}
	for _, c := range []struct {
		name  string
		nodes []string
		links []AgentLink
		want  []Action
	}{
		{"a child of the root gone", []string{"n1"}, []AgentLink{up, up, up, up, up, up, up}, []Action{PeersLost{Agents: []int{1}}}},
		{"this root's own node", []string{"n0"}, []AgentLink{up, up, up, up, up, up, up}, nil},
		{"adopted already", []string{"n1"}, []AgentLink{up, adopted, up, up, up, up, up}, nil},
		{"not a child of the root", []string{"n3"}, []AgentLink{up, up, up, up, up, up, up}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := lossPlanner(t, Rank)
			p.cfg.Resumed, p.cfg.RootNode = true, "n0"
			p.haveLinks(c.links)
			if got := p.Step(PeersGone{Nodes: c.nodes}); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
