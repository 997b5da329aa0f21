package recovery

import (
	"reflect"
	"testing"
	"time"
)

// TestGossipConfirmation: gossip's word on a death is evidence; the
// planner declares an agent lost on it only when the link that would say
// otherwise is silent, or asks the agent's parent to look.
func TestGossipConfirmation(t *testing.T) {
	ptr := func(l AgentLink) *AgentLink { return &l }
	// kept: the look that kept it (KeptAlive): it is watched from then on.
	kept := []Event{GossipDead{Linked: true, Again: true, Quiet: 200 * time.Millisecond, Left: 3 * time.Second}}
	for _, tc := range []struct {
		name    string
		before  []Event
		resumed bool       // a successor's planner
		link    *AgentLink // the root's link to the agent when gossip's word comes (nil: up)
		ev      GossipDead
		want    []Action
	}{
		{name: "a root child whose link is silent is lost", ev: GossipDead{Linked: true, Quiet: 9 * time.Second, Left: 0},
			want: []Action{DeclareLost{Agent: 0, Linked: true}}},
		{name: "a root child whose link spoke is looked at again", ev: GossipDead{Linked: true, Quiet: time.Second, Left: 3 * time.Second},
			want: []Action{CheckAgain{Agent: 0, Quiet: time.Second, After: 3 * time.Second}}},
		{name: "looked at again and silent: lost", ev: GossipDead{Linked: true, Again: true, Quiet: 4 * time.Second},
			want: []Action{DeclareLost{Agent: 0, Linked: true}}},
		{name: "looked at again and it spoke: kept, and watched", ev: GossipDead{Linked: true, Again: true, Quiet: 200 * time.Millisecond, Left: 3 * time.Second},
			want: []Action{KeptAlive{Agent: 0, Quiet: 200 * time.Millisecond}, CheckAgain{Agent: 0, Quiet: 200 * time.Millisecond, After: 3 * time.Second}}},
		{name: "watched and it spoke: looked at again, quietly", before: kept, ev: GossipDead{Linked: true, Again: true, Quiet: 100 * time.Millisecond, Left: 2 * time.Second},
			want: []Action{CheckAgain{Agent: 0, Quiet: 100 * time.Millisecond, After: 2 * time.Second, Watched: true}}},
		{name: "watched and silent (it crashed later): lost", before: kept, ev: GossipDead{Linked: true, Again: true, Quiet: 2300 * time.Millisecond},
			want: []Action{DeclareLost{Agent: 0, Linked: true}}},
		{name: "gossip's word again on a watched agent that speaks: its looks go on", before: kept, ev: GossipDead{Linked: true, Quiet: 10 * time.Millisecond, Left: 2 * time.Second}},
		{name: "gossip's word again on a watched agent, silent: lost", before: kept, ev: GossipDead{Linked: true, Quiet: 2 * time.Second},
			want: []Action{DeclareLost{Agent: 0, Linked: true}}},
		{name: "watched, its link ended: the watch ends", before: kept, link: ptr(AgentLink{Up: true, Closed: true, Inc: 1}), ev: GossipDead{Linked: true, Again: true, Left: time.Second}},
		{name: "a new incarnation of a watched agent is not watched", before: kept, link: ptr(AgentLink{Up: true, Inc: 2}), ev: GossipDead{Incarnation: 2, Linked: true, Again: true, Quiet: 100 * time.Millisecond, Left: 2 * time.Second},
			want: []Action{KeptAlive{Agent: 0, Quiet: 100 * time.Millisecond}, CheckAgain{Agent: 0, Quiet: 100 * time.Millisecond, After: 2 * time.Second}}},
		{name: "an agent below another: its parent looks", ev: GossipDead{Agent: 2, Quiet: 9 * time.Second},
			want: []Action{Suspect{Agent: 2, Parent: 0}}},
		{name: "a successor's child that did not ask for adoption", resumed: true, ev: GossipDead{Since: AdoptQuiet + time.Millisecond},
			want: []Action{DeclareLost{Agent: 0}}},
		{name: "a successor's child, too early to tell", resumed: true, ev: GossipDead{Since: time.Second}},
		{name: "a successor's child it adopted", resumed: true, link: ptr(AgentLink{Up: true, Inc: 1, Adopted: true}), ev: GossipDead{Since: AdoptQuiet + time.Millisecond}},
		{name: "the front-end's child without a link", ev: GossipDead{Since: AdoptQuiet + time.Millisecond}},
		{name: "stale: another incarnation", ev: GossipDead{Incarnation: 2, Linked: true}},
		{name: "its link ended already", link: ptr(AgentLink{Up: true, Closed: true, Inc: 1}), ev: GossipDead{Linked: true}},
		{name: "it was done", link: ptr(AgentLink{Up: true, Done: true, Inc: 1}), ev: GossipDead{Linked: true}},
		{name: "not up yet", link: ptr(AgentLink{Inc: 1}), ev: GossipDead{Linked: true}},
		{name: "the job ends", before: []Event{TimedOut{Limit: time.Second}}, ev: GossipDead{Linked: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lossPlanner(t, Rank)
			p.cfg.Resumed = tc.resumed
			for _, ev := range tc.before {
				p.Step(ev)
			}
			if tc.link != nil {
				p.haveLink(tc.ev.Agent, *tc.link)
			}
			if got := p.Step(tc.ev); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestSilentChildLost: a child of the root that gossip and its link's
// silence condemn is lost with its subtree but for the orphans, like any
// loss (the root steps LinkLost with Silent).
func TestSilentChildLost(t *testing.T) {
	p := lossPlanner(t, Rank)
	acts := p.Step(GossipDead{Agent: 1, Linked: true})
	if !reflect.DeepEqual(acts, []Action{DeclareLost{Agent: 1, Linked: true}}) {
		t.Fatalf("gossip: %+v", acts)
	}
	acts = p.Step(LinkLost{Agent: 1, Err: "gossip", Silent: true})
	if got := kinds(acts); got != "LoseSubtree,Fence,AwaitOrphans" {
		t.Fatalf("loss: %s %+v", got, acts)
	}
	p.Step(Reparented{Agent: 4, Parent: 0, Incarnation: 1})
	acts = p.Step(Reparented{Agent: 5, Parent: 0, Incarnation: 1})
	var lost Lost
	for _, a := range acts {
		if l, ok := a.(Lost); ok {
			lost = l
		}
	}
	if !lost.Silent || !reflect.DeepEqual(lost.Agents, []int{1}) {
		t.Fatalf("lost: %+v in %+v", lost, acts)
	}
}
