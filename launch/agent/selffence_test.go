package agent

import (
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// TestFenceWatch: the self-fence's decision, look by look (a look every
// tick unless the step says otherwise; quiets are the paths' silences).
func TestFenceWatch(t *testing.T) {
	sf := recovery.SelfFence{Ping: proto.UplinkPing(time.Second), Confirm: proto.ConfirmQuiet}
	L, tick := sf.Agent(), sf.Tick()
	if L != 1625*time.Millisecond || tick != 25*time.Millisecond {
		t.Fatalf("bound %v tick %v, want 1.625 s and 25 ms (docs/recovery.md)", L, tick)
	}
	type look struct {
		after  time.Duration   // since the previous look (0: tick)
		ticks  int             // looks a tick apart before this one, each kept
		quiets []time.Duration // parent, standby, gossip
		want   fenceVerdict
	}
	s := func(d ...time.Duration) []time.Duration { return d }
	cases := []struct {
		name  string
		looks []look
	}{
		{"parent, standby and gossip silent: killed after L", []look{
			{quiets: s(L-tick, L-tick, L-tick), want: fenceKeep},
			{quiets: s(L, L, L), want: fenceKill},
			{quiets: s(L+tick, L+tick, L+tick), want: fenceKeep}, // once
		}},
		{"parent crashed, backup answers: kept", []look{
			{quiets: s(L, 300*time.Millisecond), want: fenceKeep},
			{quiets: s(3*L, 100*time.Millisecond), want: fenceKeep},
		}},
		{"parent and backup silent, a gossip peer acks: kept", []look{
			{quiets: s(2*L, 2*L, 200*time.Millisecond), want: fenceKeep},
		}},
		{"no path at all: killed L after the watch began", []look{
			{ticks: int(L/tick) - 2, quiets: nil, want: fenceKeep},
			{quiets: nil, want: fenceKill},
		}},
		{"its own stall: re-armed, the stall does not count", []look{
			{quiets: s(400 * time.Millisecond), want: fenceKeep},
			{after: 10 * time.Second, quiets: s(10 * time.Second), want: fenceRearm},
			{quiets: s(10 * time.Second), want: fenceKeep},
			// silent for 400 ms before the stall and a tick after: killed
			// once that and the running time after it make L
			{ticks: int((L-400*time.Millisecond-tick)/tick) - 2, quiets: s(20 * time.Second), want: fenceKeep},
			{quiets: s(20 * time.Second), want: fenceKill},
		}},
		{"heard again after the kill", []look{
			{quiets: s(L), want: fenceKill},
			{quiets: s(10 * time.Millisecond), want: fenceHeardAgain},
			{quiets: s(20 * time.Millisecond), want: fenceKeep},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			w := &fenceWatch{bound: L, tick: tick, armed: t0.Add(-L)} // armed long enough: the quiets decide
			if c.looks[0].quiets == nil {
				w.armed = t0
			}
			now := t0
			for i, l := range c.looks {
				for range l.ticks {
					now = now.Add(tick)
					if got := w.look(now, l.quiets); got != fenceKeep {
						t.Fatalf("look %d, a tick before: got verdict %d, want it kept", i, got)
					}
				}
				now = now.Add(cmpOr(l.after, tick))
				if got := w.look(now, l.quiets); got != l.want {
					t.Fatalf("look %d: got verdict %d, want %d", i, got, l.want)
				}
			}
		})
	}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// TestSelfFencesOnlyUnderRestartOverSSH: policy none keeps today's
// behaviour (the link's end kills the ranks), and so do srun and test
// nodes (their fence reaches the node or fails at once).
func TestSelfFencesOnlyUnderRestartOverSSH(t *testing.T) {
	for _, c := range []struct {
		restart, mode string
		want          bool
	}{
		{"rank", "ssh", true}, {"job", "ssh", true}, {"none", "ssh", false}, {"", "ssh", false},
		{"rank", "local", false}, {"job", "slurm", false},
	} {
		a := &Agent{tree: &treeState{}, spec: &proto.NodeSpec{Restart: c.restart, Launch: proto.LaunchSpec{Mode: c.mode}}}
		if got := a.selfFences(); got != c.want {
			t.Errorf("restart %q mode %q: self-fences %v, want %v", c.restart, c.mode, got, c.want)
		}
	}
}

// TestFenceWatchPausesBetweenParents: while the agent has no parent link
// (it ended on its peer's answer; the agent looks for a new root) nothing
// is decided, and the silence of whatever comes next counts from the
// pause's end: a lost front-end's children keep their ranks through a
// takeover even without gossip.
func TestFenceWatchPausesBetweenParents(t *testing.T) {
	const L, tick = 1500 * time.Millisecond, 50 * time.Millisecond
	t0 := time.Unix(1000, 0)
	w := &fenceWatch{bound: L, tick: tick, armed: t0.Add(-time.Hour)}
	now := t0
	for range 3 * int(L/tick) { // three bounds between parents
		now = now.Add(tick)
		w.pause(now)
	}
	// A new parent link, silent since it came: judged from the pause's end.
	for i := 1; i < int(L/tick); i++ {
		now = now.Add(tick)
		if got := w.look(now, nil); got != fenceKeep {
			t.Fatalf("%v after the pause: verdict %d, want it kept", time.Duration(i)*tick, got)
		}
	}
	if got := w.look(now.Add(tick), nil); got != fenceKill {
		t.Fatalf("L after the pause: verdict %d, want the kill", got)
	}
}
