package proto

import (
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// The zero Timing is production's bounds; a test's shorter ones replace
// them one by one.
func TestTimingDefaults(t *testing.T) {
	var zero Timing
	if got := zero.LinkTimeout(time.Second); got != 5*time.Second || got != LinkTimeout(time.Second) {
		t.Errorf("production link timeout with 1 s heartbeats: %v", got)
	}
	if zero.SlackOr() != DefaultSlack || zero.ConfirmQuiet() != ConfirmQuiet || zero.AdoptWait() != AdoptWait {
		t.Errorf("production bounds: slack %v, confirm %v, adopt %v", zero.SlackOr(), zero.ConfirmQuiet(), zero.AdoptWait())
	}
	fast := Timing{Slack: 200 * time.Millisecond, Confirm: 300 * time.Millisecond, Adopt: 2 * time.Second}
	if got := fast.LinkTimeout(50 * time.Millisecond); got != 400*time.Millisecond {
		t.Errorf("test link timeout with 50 ms heartbeats: %v", got)
	}
	if fast.SlackOr() != fast.Slack || fast.ConfirmQuiet() != fast.Confirm || fast.AdoptWait() != fast.Adopt {
		t.Errorf("test bounds: %+v", fast)
	}
	l := NewLink(nil)
	if _, left := l.ConfirmSilence(50*time.Millisecond, fast, nil); left > UplinkPing(50*time.Millisecond)+fast.Confirm {
		t.Errorf("gossip's hysteresis under the test timing: %v left", left)
	}
}

// A lost agent's orphans are waited for one link timeout and the slack.
func TestTimingOrphanWait(t *testing.T) {
	for _, c := range []struct {
		name string
		tm   Timing
		hb   time.Duration
		want time.Duration
	}{
		{"production, 1 s heartbeats", Timing{}, time.Second, 6 * time.Second},
		{"test slack, 50 ms heartbeats", Timing{Slack: 200 * time.Millisecond}, 50 * time.Millisecond, 600 * time.Millisecond},
	} {
		if got := c.tm.OrphanWait(c.hb); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A spec carries its Timing to the agent; a spec without one (an older
// front-end's) decodes to production's.
func TestTimingSpec(t *testing.T) {
	tm := Timing{Slack: 250 * time.Millisecond, Confirm: time.Second, Adopt: 3 * time.Second, FastGossip: true}
	s := &NodeSpec{JobID: "j", Argv: []string{"p"}, Size: 2, Ranks: []int{1}, Heartbeat: 50 * time.Millisecond, Timing: tm}
	got, err := DecodeNodeSpec(s.Encode())
	if err != nil || got.Timing != tm || got.Heartbeat != s.Heartbeat {
		t.Fatalf("decoded %+v (heartbeat %v), %v; want %+v", got.Timing, got.Heartbeat, err, tm)
	}
	// The spec as it was before Timing: everything up to it (Timing and
	// what came after it, MPI and RootMerge, cut off).
	full := s.Encode()
	var e wire.Encoder
	encodeTiming(&e, tm)
	e.String(s.MPI).Bool(s.RootMerge)
	old := full[:len(full)-len(e.Data())]
	if got, err := DecodeNodeSpec(old); err != nil || got.Timing != (Timing{}) {
		t.Fatalf("a spec without timing: %+v, %v", got, err)
	}
}
