package root

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// TestFenceConfirmation: how the root confirms a lost node's fence to the
// planner: a fence that reached the node is waited for, however long it
// takes; one that has not reached it when the node has been silent for
// the self-fence bound and the grace passed is confirmed self-fenced (and
// its own end confirms nothing more); one that failed without reaching it, at
// that bound too.
func TestFenceConfirmation(t *testing.T) {
	type fenceRun struct {
		reach bool          // it reaches the node (spawn.Reached) at once
		takes time.Duration // then it ends after this
		err   error
	}
	for _, c := range []struct {
		name    string
		silence time.Duration // the node's silence at its declaration
		run     fenceRun
		want    recovery.FenceHow
		after   time.Duration // confirmed no earlier than this after the fence began
		before  time.Duration // and before this
	}{
		{"reached: waited for, 1 s", 3 * time.Second, fenceRun{reach: true, takes: time.Second}, recovery.FenceKilled, time.Second, 3 * time.Second},
		{"reached, then failed (its bound): waited for", 3 * time.Second, fenceRun{reach: true, takes: 800 * time.Millisecond, err: errors.New("no answer")}, recovery.FenceKilled, 800 * time.Millisecond, 3 * time.Second},
		{"not reached, long silent: the grace", 3 * time.Second, fenceRun{takes: 5 * time.Second, err: errors.New("i/o timeout")}, recovery.FenceSelf, recovery.FenceGrace, 2 * time.Second},
		{"not reached, silence not known: Root", 0, fenceRun{takes: 5 * time.Second, err: errors.New("i/o timeout")}, recovery.FenceSelf, 2 * time.Second, 3250 * time.Millisecond},
		{"failed at once without reaching: the grace", 3 * time.Second, fenceRun{err: errors.New("no route to host")}, recovery.FenceSelf, recovery.FenceGrace, 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			fe := &frontend{ctx: ctx, events: make(chan event, 8), opts: Options{Heartbeat: time.Second}, ioState: ioState{out: output.NewWriter(io.Discard, io.Discard, false)},
				agents: []*agentHandle{{idx: 0, name: "node3", inc: 1}}}
			fe.rec = recovery.New(recovery.Config{Policy: recovery.Rank, Ranks: 1, Agents: 1, SelfFence: fe.selfFence(), Nodes: []string{"node3"}, Up: []bool{true},
				Tree: topology.Flat([]string{"node3"})}) // fenced from outside: a tree's agent
			// Declared lost now, its node silent for c.silence (the
			// root's own link's quiet; none: its link ended).
			fe.decide(recovery.LinkLost{Agent: 0, Err: "silent", Silent: c.silence > 0, Direct: true, Quiet: c.silence, At: time.Now()})
			// confirmation is the fence's confirmation an event of the
			// root's carries: its own end (FenceDone), or the planner's
			// answer to the self-fence's timer (SelfFenced).
			confirmation := func(ev event) recovery.FenceDone {
				switch pe := ev.(evPlanner).ev.(type) {
				case recovery.FenceDone:
					return pe
				case recovery.SelfFenceDue:
					for _, act := range fe.decide(pe) {
						if sf, ok := act.(recovery.SelfFenced); ok {
							return recovery.FenceDone{Agent: sf.Agent, Node: sf.Node, Incarnation: sf.Incarnation, How: recovery.FenceSelf}
						}
					}
					t.Fatalf("the self-fence's timer confirmed nothing")
				}
				t.Fatalf("event %T", ev)
				return recovery.FenceDone{}
			}
			fe.fences = launcher.NewFences(func(ctx context.Context, node string, upTo uint64) (string, error) {
				if c.run.reach {
					spawn.Reached(ctx)
				}
				select {
				case <-time.After(c.run.takes): // the fence's own time: the fault
				case <-ctx.Done():
				}
				return "killed", c.run.err
			}, fe.goFunc)
			began := time.Now()
			fe.fenceNode(0, "node3", 1)
			var got []recovery.FenceDone
			select {
			case ev := <-fe.events:
				got = append(got, confirmation(ev))
			case <-time.After(10 * time.Second):
				t.Fatal("no confirmation within 10 s")
			}
			at := time.Since(began)
			cancel() // the fence's own end, unreached, confirms nothing more
			fe.fences.Wait()
			fe.wg.Wait()
			select {
			case ev := <-fe.events:
				if pe, ok := ev.(evPlanner).ev.(recovery.FenceDone); ok {
					got = append(got, pe)
				} else {
					t.Errorf("after the confirmation: %T", ev.(evPlanner).ev)
				}
			default:
			}
			if len(got) != 1 || got[0].How != c.want || got[0].Node != "node3" || got[0].Incarnation != 1 {
				t.Fatalf("confirmations %+v, want one, %s", got, c.want)
			}
			if at < c.after || at >= c.before {
				t.Errorf("confirmed %v after the fence began, want in [%v, %v)", at, c.after, c.before)
			}
		})
	}
}
