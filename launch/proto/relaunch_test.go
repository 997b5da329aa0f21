package proto

import (
	"context"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A relaunched agent's spec carries where its ranks and the recovery
// stand; one that does not match the node's ranks is refused.
func TestRelaunchSpec(t *testing.T) {
	rl := &RelaunchSpec{Incarnation: 2, Incs: []uint64{1, 3}, Epoch: 4, CollEpoch: 3, Suspended: true, Version: 2,
		Table: [][]byte{[]byte("a0"), []byte("a1"), []byte("a2"), []byte("a3")}}
	s := &NodeSpec{JobID: "j", Argv: []string{"p"}, Size: 4, Ranks: []int{1, 3}, Relaunch: rl}
	got, err := DecodeNodeSpec(s.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Relaunch, rl) {
		t.Fatalf("decoded %+v, want %+v", got.Relaunch, rl)
	}
	first := *s
	first.Relaunch = nil
	if got, err := DecodeNodeSpec(first.Encode()); err != nil || got.Relaunch != nil {
		t.Fatalf("a first agent's spec: %+v, %v", got, err)
	}
	bad := *s
	bad.Relaunch = &RelaunchSpec{Incarnation: 2, Incs: []uint64{1}}
	if _, err := DecodeNodeSpec(bad.Encode()); err == nil || !strings.Contains(err.Error(), "a relaunch with 1 incarnations for 2 ranks") {
		t.Fatalf("a relaunch that does not match the ranks: %v", err)
	}
}

// The gossip part of a spec round-trips; a spec without it has none.
func TestGossipSpec(t *testing.T) {
	g := &GossipSpec{Secret: []byte("0123456789abcdef0123456789abcdef"), Hosts: []string{"10.0.0.1", "127.0.0.1"}, Port: 7946}
	s := &NodeSpec{JobID: "j", Argv: []string{"p"}, Size: 2, Ranks: []int{1}, Gossip: g}
	got, err := DecodeNodeSpec(s.Encode())
	if err != nil || !reflect.DeepEqual(got.Gossip, g) {
		t.Fatalf("decoded %+v, %v; want %+v", got.Gossip, err, g)
	}
	s.Gossip = nil
	if got, err := DecodeNodeSpec(s.Encode()); err != nil || got.Gossip != nil {
		t.Fatalf("without gossip: %+v, %v", got, err)
	}
}

// TestPeers: a fallback list round-trips, the root's index -1 included,
// and a truncated one is an error.
func TestPeers(t *testing.T) {
	ps := []PeerAddr{{Idx: 4, Name: "node4", Addr: "10.0.0.5:4100"}, {Idx: -1, Name: RootName, Addr: "10.0.0.1:4000"}}
	b := EncodePeers(ps)
	got, err := DecodePeers(b)
	if err != nil || !reflect.DeepEqual(got, ps) {
		t.Fatalf("DecodePeers = %v, %v; want %v", got, err, ps)
	}
	if _, err := DecodePeers(b[:len(b)-3]); err == nil {
		t.Fatal("a truncated list decoded")
	}
	if got, err := DecodePeers(EncodePeers(nil)); err != nil || len(got) != 0 {
		t.Fatalf("an empty list: %v, %v", got, err)
	}
	// MShutdown's list of replicas that wait for the final status.
	if got, err := DecodeStrings(EncodeStrings([]string{"node2", "node7"})); err != nil || !reflect.DeepEqual(got, []string{"node2", "node7"}) {
		t.Fatalf("DecodeStrings = %v, %v", got, err)
	}
	if got, err := DecodeStrings(nil); err != nil || got != nil {
		t.Fatalf("no list: %v, %v", got, err)
	}
	if _, err := DecodeStrings([]byte{5, 1}); err == nil {
		t.Fatal("a truncated name list decoded")
	}
}

// TestConfirmSilence: gossip's death of a child counts once its uplink
// was quiet for its ping interval and ConfirmQuiet, not before.
func TestConfirmSilence(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	l := NewLink(a)
	hb := time.Second
	if _, left := l.ConfirmSilence(hb, Timing{}, nil); left < UplinkPing(hb)+ConfirmQuiet-100*time.Millisecond {
		t.Fatalf("a link heard from just now: left %v", left)
	}
	l.heard.Store(linkClock() - int64(UplinkPing(hb)+ConfirmQuiet))
	if q, left := l.ConfirmSilence(hb, Timing{}, nil); left > 0 || q < UplinkPing(hb)+ConfirmQuiet {
		t.Fatalf("a link quiet %v: left %v", q, left)
	}
	// Its silence counts only while this end was awake: a stall of this
	// process just ended, it is not confirmed.
	w := NewAwake(100 * time.Millisecond)
	w.running = true                           // as Run sets it
	w.tickAt(time.Now().Add(-3 * time.Second)) // ticks, then nothing for 3 s: stopped
	if q, left := l.ConfirmSilence(hb, Timing{}, w); left <= 0 || q != 0 {
		t.Fatalf("a link quiet while this end was stopped: quiet %v, left %v", q, left)
	}
}

// TestAwake: a process's awake time starts again after a gap in its
// ticks, and is 0 while its ticker is late.
func TestAwake(t *testing.T) {
	w := NewAwake(100 * time.Millisecond)
	t0 := time.Now()
	if got := w.For(t0.Add(time.Hour)); got < time.Hour {
		t.Errorf("a watch not running: %v, want no bound", got)
	}
	w.running = true // as Run sets it
	for i := range 10 {
		w.tickAt(t0.Add(time.Duration(i) * 100 * time.Millisecond))
	}
	if got := w.For(t0.Add(950 * time.Millisecond)); got < 900*time.Millisecond {
		t.Errorf("awake throughout: %v, want about 950ms", got)
	}
	// No tick for 2 s: the process was stopped and is only now running.
	if got := w.For(t0.Add(2900 * time.Millisecond)); got != 0 {
		t.Errorf("while its ticker is late: %v, want 0", got)
	}
	// The first tick after the gap starts the awake time again.
	w.tickAt(t0.Add(2900 * time.Millisecond))
	if got := w.For(t0.Add(3 * time.Second)); got != 100*time.Millisecond {
		t.Errorf("after the gap: %v, want 100ms", got)
	}
	if got := (*Awake)(nil).For(t0); got < time.Hour {
		t.Errorf("no watch: %v, want no bound", got)
	}
}

// TestAwakeRun: a running watch bounds silence by its awake time; once
// its context ended it bounds nothing.
func TestAwakeRun(t *testing.T) {
	w := NewAwake(10 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for got := w.For(time.Now()); got >= time.Hour || got < 20*time.Millisecond; got = w.For(time.Now()) {
		if time.Now().After(deadline) {
			t.Fatalf("a running watch: %v, want a bound that grows", got)
		}
		time.Sleep(5 * time.Millisecond) // polling the watch's state
	}
	cancel()
	<-done
	if got := w.For(time.Now()); got < time.Hour {
		t.Errorf("a stopped watch: %v, want no bound", got)
	}
}
