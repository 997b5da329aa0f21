package launcher

import (
	"context"
	"testing"

	"github.com/ftlaunch/ftlaunch/membership"
)

// TestForwardGossip: evidence is handed on in order until the member's
// events close, the receiver cannot take more, or the context ends.
func TestForwardGossip(t *testing.T) {
	evs := func(names ...string) <-chan membership.Evidence {
		ch := make(chan membership.Evidence, len(names))
		for _, n := range names {
			ch <- membership.Evidence{Node: n, Kind: membership.KindDead}
		}
		return ch
	}
	var got []string
	deliver := func(ev membership.Evidence) bool { got = append(got, ev.Node); return ev.Node != "stop" }

	closed := make(chan membership.Evidence, 2)
	closed <- membership.Evidence{Node: "a"}
	close(closed)
	ForwardGossip(t.Context(), closed, deliver)
	if len(got) != 1 || got[0] != "a" {
		t.Fatalf("closed events: forwarded %v", got)
	}

	got = nil
	ForwardGossip(t.Context(), evs("a", "stop", "b"), deliver)
	if len(got) != 2 || got[1] != "stop" {
		t.Fatalf("a receiver that stops: forwarded %v", got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	got = nil
	ForwardGossip(ctx, make(chan membership.Evidence), deliver)
	if len(got) != 0 {
		t.Fatalf("an ended context: forwarded %v", got)
	}
}
