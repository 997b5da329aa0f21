package overlay_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

func endpoints(t *testing.T, n *overlay.MemNetwork, ids ...int) []*overlay.MemEndpoint {
	t.Helper()
	var eps []*overlay.MemEndpoint
	for _, id := range ids {
		ep, err := n.Endpoint(id)
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	return eps
}

// nothingArrives reports whether ep's inbox is empty once every goroutine
// of the bubble is idle.
func nothingArrives(t *testing.T, ep *overlay.MemEndpoint) bool {
	t.Helper()
	synctest.Wait()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := ep.Recv(ctx)
	return errors.Is(err, context.Canceled)
}

func TestMemCopiesAndBounds(t *testing.T) {
	n := overlay.NewMemNetwork(overlay.MemConfig{Inbox: 2})
	defer n.Close()
	eps := endpoints(t, n, 1, 2)
	buf := []byte("hello")
	if err := eps[0].Send(2, buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'j'
	if err := eps[0].Send(2, buf); err != nil {
		t.Fatal(err)
	}
	if err := eps[0].Send(2, buf); !errors.Is(err, overlay.ErrBackpressure) {
		t.Fatalf("third send to an inbox of 2: %v", err)
	}
	m, err := eps[1].Recv(t.Context())
	if err != nil || m.From != 1 || string(m.Payload) != "hello" {
		t.Fatalf("got %+v %v", m, err)
	}
	if err := eps[0].Send(3, buf); !errors.Is(err, overlay.ErrUnreachable) {
		t.Fatalf("send to an unknown node: %v", err)
	}
	if _, err := n.Endpoint(1); err == nil {
		t.Fatalf("a second endpoint for node 1")
	}
	if err := eps[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := eps[0].Send(2, buf); !errors.Is(err, overlay.ErrUnreachable) {
		t.Fatalf("send to a closed endpoint: %v", err)
	}
	if err := eps[1].Send(1, buf); !errors.Is(err, overlay.ErrClosed) {
		t.Fatalf("send from a closed endpoint: %v", err)
	}
	// The queued message may still be read; then Recv reports the close.
	for {
		if _, err := eps[1].Recv(t.Context()); err != nil {
			if !errors.Is(err, overlay.ErrClosed) {
				t.Fatalf("recv on a closed endpoint: %v", err)
			}
			break
		}
	}
	if s := n.Stats(); s.Delivered != 2 || s.Overflow != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestMemCrashAndPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := overlay.NewMemNetwork(overlay.MemConfig{})
		defer n.Close()
		eps := endpoints(t, n, 1, 2, 3)
		if err := eps[0].Send(2, []byte("queued")); err != nil {
			t.Fatal(err)
		}
		n.Crash(2)
		if err := eps[0].Send(2, []byte("x")); err != nil {
			t.Fatalf("send to a crashed node must be silent: %v", err)
		}
		if err := eps[1].Send(1, []byte("x")); err != nil {
			t.Fatalf("send from a crashed node must be silent: %v", err)
		}
		if !nothingArrives(t, eps[1]) || !nothingArrives(t, eps[0]) {
			t.Fatalf("traffic of a crashed node was delivered")
		}
		n.Revive(2)
		if err := eps[0].Send(2, []byte("back")); err != nil {
			t.Fatal(err)
		}
		if m, err := eps[1].Recv(t.Context()); err != nil || string(m.Payload) != "back" {
			t.Fatalf("after revive: %q %v", m.Payload, err)
		}

		n.Partition(1, 3)
		_ = eps[0].Send(3, []byte("x"))
		_ = eps[2].Send(1, []byte("x"))
		if err := eps[0].Send(2, []byte("other link")); err != nil {
			t.Fatal(err)
		}
		if !nothingArrives(t, eps[2]) || !nothingArrives(t, eps[0]) {
			t.Fatalf("traffic crossed a partition")
		}
		if m, err := eps[1].Recv(t.Context()); err != nil || string(m.Payload) != "other link" {
			t.Fatalf("a partition cut another link: %v", err)
		}
		n.Heal(3, 1)
		_ = eps[2].Send(1, []byte("healed"))
		if m, err := eps[0].Recv(t.Context()); err != nil || string(m.Payload) != "healed" {
			t.Fatalf("after heal: %v", err)
		}
		if s := n.Stats(); s.Cut != 5 {
			t.Fatalf("cut %d messages, want 5 (one queued, two crashed, two partitioned)", s.Cut)
		}
	})
}

func TestMemLossIsSeeded(t *testing.T) {
	pattern := func(seed uint64) []bool {
		n := overlay.NewMemNetwork(overlay.MemConfig{Seed: seed, Loss: 0.3})
		defer n.Close()
		eps := endpoints(t, n, 0, 1)
		var got []bool
		for i := range 1000 {
			if err := eps[0].Send(1, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err := eps[1].Recv(ctx)
			got = append(got, err == nil)
		}
		return got
	}
	a, b, c := pattern(1), pattern(1), pattern(2)
	delivered := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different choice at message %d", i)
		}
		if a[i] {
			delivered++
		}
	}
	if delivered < 620 || delivered > 780 {
		t.Fatalf("%d of 1000 delivered with 30%% loss", delivered)
	}
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Fatalf("different seeds made the same choices")
	}
}

func TestMemDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := overlay.NewMemNetwork(overlay.MemConfig{Seed: 3, MinDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond})
		defer n.Close()
		eps := endpoints(t, n, 1, 2, 3)
		start := time.Now()
		for i := range 50 {
			if err := eps[0].Send(2, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if !nothingArrives(t, eps[1]) {
			t.Fatalf("a delayed message arrived at once")
		}
		seen := make(map[byte]bool)
		for range 50 {
			m, err := eps[1].Recv(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < 10*time.Millisecond || d > 20*time.Millisecond {
				t.Fatalf("delivered after %v", d)
			}
			seen[m.Payload[0]] = true
		}
		if len(seen) != 50 {
			t.Fatalf("%d distinct messages", len(seen))
		}
		// A node that crashes while a message is in flight never gets it.
		_ = eps[0].Send(3, []byte("late"))
		n.Crash(3)
		time.Sleep(30 * time.Millisecond) // fake time: past every delay
		if !nothingArrives(t, eps[2]) {
			t.Fatalf("a message in flight reached a crashed node")
		}
	})
}

// FuzzHandle feeds arbitrary messages from the parent and children to an
// engine: it may reject them, never panic.
func FuzzHandle(f *testing.F) {
	up := func(op overlay.Op, n uint64) *wire.Encoder {
		e := &wire.Encoder{}
		return e.Uint(1).Uint(uint64(op)).Uint(0).Uint(0).Uint(n)
	}
	down := func(op overlay.Op) *wire.Encoder {
		e := &wire.Encoder{}
		return e.Uint(2).Uint(uint64(op)).Uint(0).Uint(0)
	}
	f.Add(byte(2), up(overlay.OpAllgather, 2).Uint(2).Uint(20).Bytes([]byte("a")).Uint(21).Bytes([]byte("b")).Data())
	f.Add(byte(2), up(overlay.OpRing, 2).Uint(1).Uint(20).Uint(1).Bytes([]byte("a")).Bytes([]byte("b")).Data())
	f.Add(byte(2), up(overlay.OpFence, 2).Bytes((&wire.Encoder{}).String("k").Bytes([]byte("v")).Data()).Data())
	f.Add(byte(2), up(overlay.OpBarrier, 2).Data())
	f.Add(byte(0), down(overlay.OpBroadcast).Bytes([]byte("v")).Data())
	f.Add(byte(0), down(overlay.OpRing).Uint(4).Uint(1).Uint(1).Bytes(nil).Uint(2).Bytes(nil).Data())
	f.Add(byte(0), down(overlay.OpFence).Bytes(nil).Data())
	f.Fuzz(func(t *testing.T, from byte, msg []byte) {
		n := overlay.NewMemNetwork(overlay.MemConfig{Inbox: 16})
		defer n.Close()
		eps := endpoints(t, n, 0, 1, 2, 3)
		e, err := overlay.NewEngine(overlay.Config{ID: 1, Transport: eps[1], MaxOpen: 8, MaxDeferred: 8, Topology: overlay.Topology{
			Parent: 0, Members: []int{10, 11},
			Children: []overlay.Child{{ID: 2, Members: 2}, {ID: 3, Members: 0}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		src := []int{0, 2, 3, 7}[from%4]
		_ = e.Handle(src, msg)
		for _, op := range []overlay.Op{overlay.OpAllgather, overlay.OpRing, overlay.OpFence, overlay.OpBarrier} {
			_ = e.Contribute(overlay.CollID{}, op, 10, []byte("x"))
			_ = e.Contribute(overlay.CollID{}, op, 11, []byte("y"))
		}
		_ = e.Handle(src, msg)
		_ = e.SetEpoch(1)
		_, _ = e.Get("k")
	})
}
