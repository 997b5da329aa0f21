package agent

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// A child gossip condemned while its link spoke is kept but watched
// (recovery/detect.go, docs/membership.md): when it goes silent later,
// its parent ends its link as silent once the silence reaches
// ConfirmSilence's bound, long before the link's heartbeat timeout. The
// timing is the test's own (a 10 ms ping, 150 ms of hysteresis, a 10 s
// heartbeat timeout), so only the watch can end the link.
func TestWatchedChildSilentLaterIsLost(t *testing.T) {
	hb := 80 * time.Millisecond // the child pings every 10 ms
	timing := proto.Timing{Confirm: 150 * time.Millisecond, Slack: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	childConn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer childConn.Close()
	parentConn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	pl, cl := proto.NewLink(parentConn), proto.NewLink(childConn)
	defer parentConn.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ignore := func(uint8, []byte) error { return nil }
	ended := make(chan error, 1)
	wg.Add(1)
	go func() { // the parent's end, as the agent runs it
		defer wg.Done()
		ended <- pl.Run(ctx, hb, timing.LinkTimeout(hb), ignore)
	}()
	childCtx, crash := context.WithCancel(ctx)
	wg.Add(1)
	go func() { // the child: it pings until it "crashes" (stops writing; its connection stays open, as a stopped process's or a dead host's)
		defer wg.Done()
		tick := time.NewTicker(proto.UplinkPing(hb))
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				_ = cl.Send(proto.MPing, nil)
			case <-childCtx.Done():
				return
			}
		}
	}()

	ts := newTreeState(1, nil, ln)
	ts.children[3] = pl
	a := &Agent{ctx: ctx, wg: &wg, log: io.Discard, tree: ts, spec: &proto.NodeSpec{Node: "node1", Heartbeat: hb, Timing: timing}}
	a.suspectChild(3) // gossip's word, while the child speaks
	a.suspectChild(3) // again: one watch

	// The fault schedule: the child speaks for several bounds (looked at
	// and kept each time), then goes silent.
	time.Sleep(4 * (proto.UplinkPing(hb) + timing.Confirm))
	select {
	case err := <-ended:
		t.Fatalf("a child that spoke was condemned: %v", err)
	default:
	}
	ts.mu.Lock()
	condemned := ts.condemned[pl]
	ts.mu.Unlock()
	if condemned {
		t.Fatal("a child that spoke was condemned")
	}
	crash()
	silent := time.Now()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the watched child's silence did not end its link")
	}
	ts.mu.Lock()
	condemned = ts.condemned[pl]
	ts.mu.Unlock()
	if !condemned {
		t.Error("the link ended, but not as condemned by gossip and its silence")
	}
	if took := time.Since(silent); took >= timing.LinkTimeout(hb) {
		t.Errorf("ended %v after the silence: the heartbeat's timeout, not the watch", took)
	}
}
