package sshspawn

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestHostLimiterAdapts checks the per-host window in fake time: a drop
// halves it and pauses new handshakes; completed ones grow it back.
func TestHostLimiterAdapts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := hostLimiter{max: 4, pause: 100 * time.Millisecond, slots: make(map[string]*hostSlot)}
		ctx := context.Background()
		var rels []func(outcome)
		for i := 0; i < 4; i++ {
			r, err := l.acquire(ctx, "h:22")
			if err != nil {
				t.Fatal(err)
			}
			rels = append(rels, r)
		}
		start := time.Now()
		got := make(chan time.Duration, 1)
		go func() {
			r, err := l.acquire(ctx, "h:22")
			if err != nil {
				t.Error(err)
				return
			}
			got <- time.Since(start)
			r(outcomeOK)
		}()
		blocked := func(when string) {
			synctest.Wait()
			select {
			case d := <-got:
				t.Fatalf("%s: acquired after %v, want blocked", when, d)
			default:
			}
		}
		blocked("window full")
		rels[0](outcomeDropped) // window 4 -> 2, 3 still in use
		blocked("after a drop")
		rels[1](outcomeOther)
		rels[2](outcomeOther) // 1 in use < 2, but paused
		blocked("during the pause")
		if d := <-got; d != 100*time.Millisecond {
			t.Errorf("acquired after %v, want the 100ms pause", d)
		}
		synctest.Wait()
		l.mu.Lock()
		if hs := l.slots["h:22"]; hs == nil || hs.limit != 3 || hs.inUse != 1 {
			t.Errorf("slot = %+v, want limit 3 (2 + one success), 1 in use", hs)
		}
		l.mu.Unlock()
		rels[3](outcomeOK)
		rels[3](outcomeOK) // a second release is ignored
		if len(l.slots) != 0 {
			t.Errorf("idle address kept: %v", l.slots)
		}

		// A cancelled waiter leaves no trace.
		r, _ := l.acquire(ctx, "h:22")
		l.max = 1
		l.slots["h:22"].limit = 1
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { _, err := l.acquire(cctx, "h:22"); errc <- err }()
		synctest.Wait()
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("cancelled acquire = %v", err)
		}
		r(outcomeOK)
		if len(l.slots) != 0 {
			t.Errorf("slots after cancel: %v", l.slots)
		}
	})
}
