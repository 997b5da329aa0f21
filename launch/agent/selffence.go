package agent

// The self-fence (docs/recovery.md, "Fencing"): a root that declared this
// agent lost and whose fence from outside cannot reach the node (a cut
// link, a host that does not answer) takes the node for fenced once its
// silence reached the self-fence bound (recovery.SelfFence), and starts the
// lost ranks elsewhere. So an agent that has heard nothing on any upward
// path for recovery.SelfFence.Agent — its parent link, its standby link to
// its backup parent, a gossip peer's ack of its probe — is cut off: it
// kills its ranks (their process groups, SIGKILL, as the fence would) at
// once. It says so, and says so again when it is heard again. An orphan
// whose backup parent or gossip peers answer keeps its ranks. Its own
// stall (the agent stopped or starved: its look came late) does not count
// as silence: the watch re-arms.

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// fenceVerdict is what one look at the upward paths decides.
type fenceVerdict int

const (
	fenceKeep       fenceVerdict = iota // heard recently enough
	fenceRearm                          // its own look came late: the stall does not count
	fenceKill                           // silent for the bound: kill the ranks
	fenceHeardAgain                     // heard again after it killed them
)

// fenceWatch decides, from each look at the upward paths' silences,
// whether the agent is cut off. It is a value the watch's goroutine owns.
type fenceWatch struct {
	bound, tick time.Duration
	armed       time.Time     // silence counts from here at the earliest
	last        time.Time     // when it last looked (zero: never)
	silent      time.Duration // the silence it counted then
	fenced      bool          // it killed the ranks and was not heard since
}

// lateAfter is how late a look must be (beyond its tick) for the watch to
// take itself for stalled.
func (w *fenceWatch) lateAfter() time.Duration { return 4 * w.tick }

// pause is a look while the agent has no parent link (between parents):
// nothing is decided, and silence counts again from now.
func (w *fenceWatch) pause(now time.Time) {
	w.last, w.armed, w.silent = now, now, 0
}

// look takes the silence of each upward path at now (none: no path, all
// silent) and decides.
func (w *fenceWatch) look(now time.Time, quiets []time.Duration) fenceVerdict {
	silent := time.Duration(1<<63 - 1)
	for _, q := range quiets {
		silent = min(silent, q)
	}
	v := fenceKeep
	if !w.last.IsZero() && now.Sub(w.last) > w.tick+w.lateAfter() {
		// Stopped or starved: what the paths said meanwhile may still be
		// unread. The silence counted before the stall counts; the
		// stall does not.
		w.armed = now.Add(-w.silent)
		v = fenceRearm
	}
	silent = min(silent, now.Sub(w.armed))
	w.last, w.silent = now, silent
	switch {
	case w.fenced && silent < w.bound:
		w.fenced = false
		return fenceHeardAgain
	case !w.fenced && silent >= w.bound:
		w.fenced = true
		return fenceKill
	}
	return v
}

// selfFences reports whether this agent fences itself: under a restart
// policy (a lost node's ranks start again elsewhere), in a job whose
// agents SSH starts (the root waits for a fence by srun or of a test node,
// which reaches its node or fails at once).
func (a *Agent) selfFences() bool {
	s := a.spec
	return a.tree != nil && s != nil && (s.Restart == "rank" || s.Restart == "job") && s.Launch.Mode == "ssh"
}

// watchUpward runs the self-fence's watch until ctx ends.
func (a *Agent) watchUpward(ctx context.Context, wg *sync.WaitGroup) {
	if !a.selfFences() {
		return
	}
	sf := recovery.SelfFence{Ping: proto.UplinkPing(a.spec.Heartbeat), Confirm: a.spec.Timing.ConfirmQuiet()}
	w := &fenceWatch{bound: max(sf.Agent(), sf.Tick()), tick: sf.Tick(), armed: time.Now()}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(w.tick)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			qs, between := a.upwardQuiets()
			if between {
				w.pause(time.Now())
				continue
			}
			switch w.look(time.Now(), qs) {
			case fenceKill:
				a.logf("heard nothing from its parent, backup parent or gossip peers for %v: cut off, it killed its ranks (the root starts them elsewhere)", w.silent.Round(time.Millisecond))
				a.trace.Logf("self-fenced: silent for %v", w.silent.Round(time.Millisecond))
				a.killAll(syscall.SIGKILL)
			case fenceHeardAgain:
				a.logf("heard from the job again after it killed its ranks as cut off")
				a.trace.Logf("heard again after the self-fence")
			case fenceRearm:
				a.trace.Logf("self-fence watch: its look came late (stopped or starved): re-armed")
			}
		}
	}()
}

// upwardQuiets is how long each upward path of the agent has been silent:
// its parent link, its standby link (while it runs), its gossip member's
// last acked probe (once it has one). between: its parent link ended and
// it has no new one yet (it looks for a new root or parent): the watch
// pauses. A link ends on its peer's answer (EOF, a reset: the host
// answers, so the root's fence reaches it) or on the heartbeat's timeout
// (LinkTimeout, past the bound: a cut agent killed its ranks before).
// Without the pause, the children of a lost front-end of a job whose
// gossip did not start killed their ranks while a successor took over.
func (a *Agent) upwardQuiets() (qs []time.Duration, between bool) {
	a.up.mu.Lock()
	if a.up.down {
		a.up.mu.Unlock()
		return nil, true
	}
	if l := a.up.l; l != nil {
		qs = append(qs, l.Quiet())
	}
	a.up.mu.Unlock()
	a.mu.Lock()
	sb := a.par.backup
	a.mu.Unlock()
	if sb != nil {
		select {
		case <-sb.ended:
		default:
			qs = append(qs, sb.l.Quiet())
		}
	}
	if m := a.fo.member.Load(); m != nil {
		if t := m.LastAck(); !t.IsZero() {
			qs = append(qs, time.Since(t))
		}
	}
	return qs, false
}
