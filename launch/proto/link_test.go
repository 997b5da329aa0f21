package proto

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

func socketpair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	t.Cleanup(func() { conns[0].Close(); conns[1].Close() })
	return conns[0], conns[1]
}

// A peer that reads everything but never answers is declared dead: this is
// what a wedged process, or a crashed host, looks like.
func TestLinkHeartbeatTimeout(t *testing.T) {
	a, b := socketpair(t)
	go io.Copy(io.Discard, b)
	l := NewLink(a)
	err := l.Run(context.Background(), 10*time.Millisecond, 100*time.Millisecond, func(uint8, []byte) error { return nil })
	if !errors.Is(err, ErrHeartbeat) {
		t.Fatalf("run returned %v, want a heartbeat timeout", err)
	}
}

// Two live ends keep each other alive and deliver frames in order.
func TestLinkDeliversAndAnswersPings(t *testing.T) {
	a, b := socketpair(t)
	la, lb := NewLink(a), NewLink(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan int64, 100)
	errc := make(chan error, 1)
	go func() {
		errc <- lb.Run(ctx, 5*time.Millisecond, 2*time.Second, func(typ uint8, p []byte) error {
			v, err := DecodeInt(p)
			got <- v
			return err
		})
	}()
	go la.Run(ctx, 5*time.Millisecond, 2*time.Second, func(uint8, []byte) error { return nil })
	for i := range int64(50) {
		if err := la.Send(MSignal, EncodeInt(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int64(50) {
		if v := <-got; v != i {
			t.Fatalf("frame %d carried %d", i, v)
		}
	}
	cancel()
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		t.Logf("run ended with %v", err)
	}
}

// A forged, oversized frame ends the link with an error, not an
// allocation or a hang.
func TestLinkRejectsOversizedFrame(t *testing.T) {
	a, b := socketpair(t)
	go func() {
		b.Write([]byte{0x7f, 0xff, 0xff, 0xff, wire.Version, MOutput})
	}()
	err := NewLink(a).Run(context.Background(), 0, time.Second, func(uint8, []byte) error { return nil })
	if !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("run returned %v, want ErrTooLarge", err)
	}
}

// FuzzDecoders feeds arbitrary payloads to every link message decoder:
// none may panic.
func FuzzDecoders(f *testing.F) {
	f.Add((&NodeSpec{JobID: "j", Argv: []string{"a"}, Size: 2, Ranks: []int{0, 1}}).Encode())
	f.Add(RankStatus{Rank: 1, Code: 7}.Encode())
	f.Add((&Contrib{Seq: 1, Ranks: []int{0}, Values: [][]byte{{1}}, KV: map[string][]byte{"k": {2}}}).Encode())
	f.Add((&CollResult{Seq: 1, Values: [][]byte{{1}, {2}}}).Encode())
	f.Add((&Contrib{Seq: 2, Op: rankproto.OpRing, Ranks: []int{0, 3}, Values: [][]byte{{1}, {2}}, Covers: []int{1}, Spans: []Span{{0, 3}}}).Encode())
	f.Add(RingAsk{Seq: 2, Ranks: []int{4, 9}}.Encode())
	f.Add(Started{Ranks: []int{0}, Pids: []int{42}}.Encode())
	f.Add(encodeOutput(1, 3, StreamStdout, []byte("hi\n")))
	f.Fuzz(func(t *testing.T, p []byte) {
		DecodeNodeSpec(p)
		DecodeRankStatus(p)
		DecodeContrib(p)
		DecodeCollResult(p)
		DecodeRingAsk(p)
		DecodeStarted(p)
		DecodeOutput(p)
		DecodeAbort(p)
		DecodeInt(p)
	})
}

func TestResolveProgram(t *testing.T) {
	dir := t.TempDir()
	exe := dir + "/prog"
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := dir + "/plain"
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prog, path string
		code       int
	}{
		{"./prog", "", 0},
		{"prog", dir, 0},
		{"prog", "/nonexistent:" + dir, 0},
		{"./plain", "", 126},
		{"plain", dir, 126},
		{"./missing", "", 127},
		{"missing", dir, 127},
		{".", dir, 126},
		{"./", "", 126},
	} {
		_, err := ResolveProgram(tc.prog, dir, tc.path)
		var pe *ProgramError
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%q in %q: %v", tc.prog, tc.path, err)
		case tc.code != 0 && (!errors.As(err, &pe) || pe.Code != tc.code):
			t.Errorf("%q in %q: got %v, want code %d", tc.prog, tc.path, err, tc.code)
		}
	}
}

func TestBootstrap(t *testing.T) {
	b := &Bootstrap{Creds: []byte("creds"), Port: 4242, Hosts: []string{"10.0.0.1"}, Inc: 2, Job: "ft-0123456789ab", Node: "node7"}
	got, err := ReadBootstrap(bytes.NewReader(b.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Creds) != "creds" || got.Port != 4242 || len(got.Hosts) != 1 || got.Inc != 2 || got.Job != b.Job || got.Node != "node7" {
		t.Fatalf("round trip: %+v", got)
	}
	// A group's entry names the agent's node for its fence record.
	g := &Bootstrap{Job: b.Job, Group: []GroupEntry{{Name: "n1", Idx: 1, Creds: []byte("a")}, {Name: "n2", Idx: 2, Creds: []byte("b")}}}
	gb, err := ReadBootstrap(bytes.NewReader(g.Encode()))
	if err == nil {
		err = gb.Pick("n2")
	}
	if err != nil || gb.Node != "n2" || gb.Idx != 2 || string(gb.Creds) != "b" || gb.Job != b.Job {
		t.Fatalf("group pick: %v, %+v", err, gb)
	}
	addrs := FrontendAddrs(got, func(k string) string {
		if k == "SSH_CONNECTION" {
			return "10.9.0.1 50000 10.9.0.2 22"
		}
		return ""
	})
	if len(addrs) != 2 || addrs[0] != "10.9.0.1:4242" || addrs[1] != "10.0.0.1:4242" {
		t.Fatalf("addresses %q", addrs)
	}
	for _, bad := range [][]byte{nil, []byte("garbage that is not a frame"), wire.AppendFrame(nil, MSpec, []byte{0xff})} {
		if _, err := ReadBootstrap(bytes.NewReader(bad)); err == nil {
			t.Errorf("bootstrap %q accepted", bad)
		}
	}
}

// A handler that holds the reader longer than the heartbeat timeout (the
// front-end's event loop is busy) is not the peer's silence.
func TestLinkBusyHandlerIsNotSilence(t *testing.T) {
	a, b := socketpair(t)
	go io.Copy(io.Discard, b) // the peer reads our pings but never sends again
	b.Write(wire.AppendFrame(nil, MSignal, EncodeInt(1)))
	released := make(chan struct{})
	var releasedFirst bool
	go func() {
		// The sleep is the thing under test: a handler busy for three
		// heartbeat timeouts.
		time.Sleep(300 * time.Millisecond)
		close(released)
	}()
	err := NewLink(a).Run(context.Background(), 10*time.Millisecond, 100*time.Millisecond, func(uint8, []byte) error {
		<-released
		releasedFirst = true
		return nil
	})
	if !releasedFirst || !errors.Is(err, ErrHeartbeat) {
		t.Fatalf("run returned %v (handler released first: %v); want a heartbeat timeout only after the handler returned", err, releasedFirst)
	}
}

// readFrames counts the frames of each type the peer end b receives until
// it is closed.
func readFrames(b net.Conn) <-chan map[uint8]int {
	out := make(chan map[uint8]int, 1)
	go func() {
		n := map[uint8]int{}
		r := wire.NewReader(b, linkMaxFrame)
		for {
			f, err := r.Next()
			if err != nil {
				out <- n
				return
			}
			n[f.Type]++
		}
	}()
	return out
}

// An end that pings does not answer the peer's pings (the peer hears its
// own pings), and skips its ping while other frames keep the link busy.
func TestLinkPingsOnlyWhenQuiet(t *testing.T) {
	a, b := socketpair(t)
	counts := readFrames(b)
	ctx, cancel := context.WithCancel(context.Background())
	l := NewLink(a)
	errc := make(chan error, 1)
	go func() { errc <- l.Run(ctx, 20*time.Millisecond, time.Second, func(uint8, []byte) error { return nil }) }()
	ping := wire.AppendFrame(nil, MPing, nil)
	// Quiet: pings every interval, no pongs for the peer's pings. The
	// sleeps pace the test's own traffic.
	for range 10 {
		b.Write(ping)
		time.Sleep(10 * time.Millisecond)
	}
	// Busy: a frame every 5 ms, no pings.
	for range 40 {
		if err := l.Send(MSignal, EncodeInt(1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-errc
	n := <-counts
	if n[MPong] != 0 {
		t.Errorf("answered %d pings although it pings itself", n[MPong])
	}
	// About 5 pings in the quiet 100 ms, at most one or two in the busy
	// 200 ms (a late tick); 30 or so if it pinged through the busy time.
	if n[MPing] < 2 || n[MPing] > 12 {
		t.Errorf("%d pings, want about 5 (quiet 100 ms, then 200 ms busy at 20 ms intervals)", n[MPing])
	}
}

// An end that does not ping answers pings, so that its peer hears it.
func TestLinkWithoutIntervalAnswersPings(t *testing.T) {
	a, b := socketpair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go NewLink(a).Run(ctx, 0, time.Second, func(uint8, []byte) error { return nil })
	r := wire.NewReader(b, linkMaxFrame)
	for i := range 3 {
		b.Write(wire.AppendFrame(nil, MPing, nil))
		b.SetReadDeadline(time.Now().Add(5 * time.Second))
		f, err := r.Next()
		if err != nil || f.Type != MPong {
			t.Fatalf("ping %d: got frame type %d, %v; want a pong", i, f.Type, err)
		}
	}
}

// Pings of different links fall on the same instants.
func TestUntilNextMultipleAligns(t *testing.T) {
	d := time.Second
	base := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	for _, off := range []time.Duration{0, 1, 300 * time.Millisecond, 499 * time.Millisecond, 500 * time.Millisecond, 999 * time.Millisecond} {
		now := base.Add(off)
		next := now.Add(untilNextMultiple(now, d))
		if next.Sub(base)%d != 0 {
			t.Errorf("offset %v: next ping at %v, not a multiple of %v", off, next, d)
		}
		if w := next.Sub(now); w < d/2 || w > 3*d/2 {
			t.Errorf("offset %v: waits %v, want between %v and %v", off, w, d/2, 3*d/2)
		}
	}
}

// Before a link runs, Await answers pings, passes other frames to its
// handler, and returns the one the handler takes (as changed by it).
func TestLinkAwait(t *testing.T) {
	a, b := socketpair(t)
	l := NewLink(a)
	peer := NewLink(b)
	go func() {
		for _, typ := range []uint8{MPing, MStdin, MPing, MSpec} {
			if err := peer.Send(typ, []byte{typ}); err != nil {
				return
			}
		}
	}()
	var skipped []uint8
	f, err := l.Await(func(f *wire.Frame) (bool, error) {
		if f.Type == MSpec {
			f.Payload = []byte("taken")
			return true, nil
		}
		skipped = append(skipped, f.Type)
		return false, nil
	})
	if err != nil || f.Type != MSpec || string(f.Payload) != "taken" {
		t.Fatalf("await: %v, %v", f, err)
	}
	if len(skipped) != 1 || skipped[0] != MStdin {
		t.Fatalf("handler saw %v, want only the stdin frame", skipped)
	}
	for range 2 { // both pings were answered
		g, err := peer.R.Next()
		if err != nil || g.Type != MPong {
			t.Fatalf("peer got %v, %v; want a pong", g, err)
		}
	}
	// A handler's error ends the wait.
	go peer.Send(MStdin, nil)
	bad := errors.New("bad frame")
	if _, err := l.Await(func(*wire.Frame) (bool, error) { return false, bad }); !errors.Is(err, bad) {
		t.Fatalf("await: %v, want the handler's error", err)
	}
}

// TestLinkTCPLocalAddr: a TCP link names the address its peer reached;
// a socketpair's link and none name nothing.
func TestLinkTCPLocalAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { // joined by the receive below
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s := <-accepted; s != nil {
		defer s.Close()
		if got := NewLink(s).TCPLocalAddr(); got != ln.Addr().String() {
			t.Errorf("accepted link: %q, want %q", got, ln.Addr().String())
		}
	} else {
		t.Fatal("accept failed")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var none *Link
	if NewLink(a).TCPLocalAddr() != "" || none.TCPLocalAddr() != "" {
		t.Error("a pipe's or a nil link's address is not empty")
	}
}
