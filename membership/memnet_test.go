package membership

import (
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

func newPair(t *testing.T, n *Network) (*MemTransport, *MemTransport) {
	t.Helper()
	a, err := n.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(); _ = b.Shutdown() })
	return a, b
}

// received reports whether a packet is waiting on t, consuming it.
func received(t *MemTransport) bool {
	select {
	case <-t.PacketCh():
		return true
	default:
		return false
	}
}

func TestNetworkDeliversCopies(t *testing.T) {
	n := NewNetwork(1)
	a, b := newPair(t, n)
	if a.Addr() == b.Addr() {
		t.Fatal("two endpoints share an address")
	}
	ip, port, err := a.FinalAdvertiseAddr("", 0)
	if err != nil || net.JoinHostPort(ip.String(), "7946") != a.Addr() || port != 7946 {
		t.Fatalf("FinalAdvertiseAddr = %v %v %v", ip, port, err)
	}
	buf := []byte("ping")
	if _, err := a.WriteTo(buf, b.Addr()); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X'
	p := <-b.PacketCh()
	if string(p.Buf) != "ping" || p.From.String() != a.Addr() {
		t.Fatalf("got %q from %v", p.Buf, p.From)
	}
}

func TestNetworkCrashDropsBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		a, b := newPair(t, n)

		// An open stream is cut by the crash.
		accepted := make(chan net.Conn, 1)
		go func() { accepted <- <-b.StreamCh() }()
		conn, err := a.DialTimeout(b.Addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		peer := <-accepted
		n.Crash(b.Addr())
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatal("read on a stream to a crashed peer succeeded")
		}
		_ = peer.Close()
		_ = conn.Close()

		if _, err := a.WriteTo([]byte("x"), b.Addr()); err != nil {
			t.Fatalf("write to crashed peer: %v (want silent drop)", err)
		}
		if _, err := b.WriteTo([]byte("x"), a.Addr()); err != nil {
			t.Fatalf("write from crashed peer: %v", err)
		}
		if received(a) || received(b) {
			t.Fatal("a packet crossed a crash")
		}
		start := time.Now()
		_, err = a.DialTimeout(b.Addr(), 3*time.Second)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("dial to crashed peer: %v, want a timeout", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("dial to crashed peer failed after %v, want the full 3s", d)
		}
		if s := n.Stats(); s.Cut != 2 || s.StreamsCut != 1 || s.DialTimeouts != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestNetworkShutdownRefuses(t *testing.T) {
	n := NewNetwork(1)
	a, b := newPair(t, n)
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(); err != nil {
		t.Fatal("second shutdown:", err)
	}
	if _, err := a.DialTimeout(b.Addr(), time.Hour); err == nil {
		t.Fatal("dial to a shut-down endpoint succeeded")
	}
	if _, err := b.WriteTo([]byte("x"), a.Addr()); err == nil {
		t.Fatal("write from a shut-down endpoint succeeded")
	}
}

func TestNetworkPartitionAndHeal(t *testing.T) {
	n := NewNetwork(1)
	a, b := newPair(t, n)
	c, d := newPair(t, n)
	n.Partition([]string{a.Addr(), b.Addr()})
	send := func(from, to *MemTransport) bool {
		if _, err := from.WriteTo([]byte("x"), to.Addr()); err != nil {
			t.Fatal(err)
		}
		return received(to)
	}
	if !send(a, b) || !send(c, d) {
		t.Fatal("no delivery within an island")
	}
	if send(a, c) || send(d, b) {
		t.Fatal("delivery across the partition")
	}
	if _, err := a.DialTimeout(c.Addr(), 0); err == nil {
		t.Fatal("dial across the partition succeeded")
	}
	n.Heal()
	if !send(a, c) || !send(d, b) {
		t.Fatal("no delivery after heal")
	}
}

func TestNetworkSeededLoss(t *testing.T) {
	if err := NewNetwork(1).SetLoss(1.5); err == nil {
		t.Fatal("loss 1.5 accepted")
	}
	lost := func(seed uint64) uint64 {
		n := NewNetwork(seed)
		a, b := newPair(t, n)
		if err := n.SetLoss(0.3); err != nil {
			t.Fatal(err)
		}
		for range 10000 {
			if _, err := a.WriteTo([]byte("x"), b.Addr()); err != nil {
				t.Fatal(err)
			}
			received(b)
		}
		s := n.Stats()
		if s.Lost+s.Delivered != 10000 {
			t.Fatalf("stats %+v", s)
		}
		return s.Lost
	}
	l1, l2, l3 := lost(7), lost(7), lost(8)
	if l1 != l2 {
		t.Fatalf("same seed, different losses: %d, %d", l1, l2)
	}
	if l1 == l3 {
		t.Logf("seeds 7 and 8 lost the same number of packets (%d); possible but unlikely", l1)
	}
	if l1 < 2700 || l1 > 3300 {
		t.Fatalf("lost %d of 10000 at p=0.3", l1)
	}
}

func TestNetworkStreamsCarryData(t *testing.T) {
	n := NewNetwork(1)
	a, b := newPair(t, n)
	go func() {
		c := <-b.StreamCh()
		defer c.Close()
		_, _ = io.Copy(c, c) // echo until the dialer closes
	}()
	conn, err := a.DialTimeout(b.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "hello" {
		t.Fatalf("echo = %q, %v", got, err)
	}
}

// memConfig is a member on an in-memory transport.
func memConfig(t *testing.T, n *Network, name string, inc uint64, seeds ...string) Config {
	t.Helper()
	tr, err := n.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	return Config{Name: name, Incarnation: inc, Role: "agent", Secret: testSecret, Transport: tr, Seeds: seeds}
}

// drainCluster runs after the members' cleanups (register it first) and
// lets memberlist's post-shutdown timers expire in fake time.
func drainCluster(t *testing.T) {
	t.Cleanup(func() {
		p := ClusterProfile()
		time.Sleep(p.TCPTimeout + p.ProbeInterval)
	})
}

// TestRelaunchedAgentRejoins crashes an agent and relaunches it under the
// same name, a new incarnation and a new address, as the recovery protocol
// does on a spare node.
func TestRelaunchedAgentRejoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drainCluster(t)
		ctx := t.Context()
		n := NewNetwork(3)
		seed, rs := startRecorded(t, ctx, memConfig(t, n, "a0", 1))
		recs := []*recorder{rs}
		for _, name := range []string{"a1", "a2", "a3"} {
			_, r := startRecorded(t, ctx, memConfig(t, n, name, 1, seed.Addr()))
			recs = append(recs, r)
		}
		victim, _ := startRecorded(t, ctx, memConfig(t, n, "v", 1, seed.Addr()))
		for _, r := range recs {
			r.waitKind(t, 60*time.Second, "v", 1, KindAlive)
		}
		n.Crash(victim.Addr())
		for _, r := range recs {
			r.waitKind(t, 10*time.Second, "v", 1, KindDead)
		}
		// memberlist accepts a known name from a new address only once the
		// old one has been dead for DeadNodeReclaimTime; the root's decision
		// and the relaunch take at least that long.
		time.Sleep(ClusterProfile().DeadNodeReclaimTime)
		v2, _ := startRecorded(t, ctx, memConfig(t, n, "v", 2, seed.Addr()))
		for _, r := range recs {
			e := r.waitKind(t, 60*time.Second, "v", 2, KindAlive)
			if e.Addr != v2.Addr() {
				t.Errorf("%s sees v#2 at %s, want %s", r.m.Name(), e.Addr, v2.Addr())
			}
		}
	})
}

// TestUnreadEventsNeverBlockMemberlist leaves one member's Events unread
// while the cluster churns; memberlist must keep working (the others still
// detect a crash) and the unread member's queue must hold the evidence.
func TestUnreadEventsNeverBlockMemberlist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drainCluster(t)
		ctx := t.Context()
		n := NewNetwork(4)
		cfg := memConfig(t, n, "deaf", 1)
		cfg.QueueLimit = 4
		deaf, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = deaf.Shutdown() })
		var recs []*recorder
		var ms []*Member
		for _, name := range []string{"b0", "b1", "b2", "b3", "b4", "b5"} {
			m, r := startRecorded(t, ctx, memConfig(t, n, name, 1, deaf.Addr()))
			ms = append(ms, m)
			recs = append(recs, r)
		}
		// Members that join the same seed back to back may learn of each
		// other only at the next push/pull (PushPullInterval, 30 s).
		for _, r := range recs {
			for _, m := range ms {
				if m != r.m {
					r.waitKind(t, 60*time.Second, m.Name(), 1, KindAlive)
				}
			}
		}
		n.Crash(ms[5].Addr())
		for _, r := range recs[:5] {
			r.waitKind(t, 10*time.Second, "b5", 1, KindDead)
		}
		if err := ms[4].Leave(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs[:4] {
			r.waitKind(t, 10*time.Second, "b4", 1, KindLeft)
		}
		// The deaf member heard 6 joins, a death and a leave with room for 4:
		// alive evidence was evicted, the dead and left were kept.
		s := deaf.QueueStats()
		if s.Evicted == 0 {
			t.Errorf("no eviction with an unread queue of 4: %+v", s)
		}
		// Read what is pending: at most the queue limit plus the one item
		// the dispatcher holds.
		var got []Evidence
		var dead, left bool
		for !dead || !left {
			select {
			case e := <-deaf.Events():
				got = append(got, e)
				dead = dead || (e.Node == "b5" && e.Kind == KindDead)
				left = left || (e.Node == "b4" && e.Kind == KindLeft)
			case <-time.After(time.Second):
				t.Fatalf("terminal evidence lost from the deaf member's queue: %v (stats %+v)", got, s)
			}
		}
		if len(got) > cfg.QueueLimit+1 {
			t.Errorf("read %d items from a queue limited to %d: %v", len(got), cfg.QueueLimit, got)
		}
	})
}
