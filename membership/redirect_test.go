package membership

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// TestRedirectReachesAMultiHomedRoot: a front-end that advertises an
// address its agents cannot reach (a multi-homed machine's default route;
// the emulated cluster's hosts have no route to it) is probed and answered
// at the address each agent reached it at. Two such clusters side by
// side: the agents with the redirect never suspect their root, those
// without do (the control).
func TestRedirectReachesAMultiHomedRoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := TestProfile()
	cluster := func(label string, redirect bool) []*recorder {
		rc := udpConfig(RootName, 1, p)
		rc.Role, rc.Label = "root", label
		rc.AdvertiseAddr = "198.51.100.7" // TEST-NET-2: routed nowhere
		root, _ := startRecorded(t, ctx, rc)
		_, port, err := net.SplitHostPort(root.Addr())
		if err != nil {
			t.Fatal(err)
		}
		seed := net.JoinHostPort("127.0.0.1", port)
		var out []*recorder
		for _, name := range []string{"node1", "node2"} {
			ac := udpConfig(name, 1, p, seed)
			ac.Label = label
			if redirect {
				ac.Redirect = map[string]string{RootName: seed}
			}
			_, r := startRecorded(t, ctx, ac)
			out = append(out, r)
		}
		return out
	}
	with, without := cluster("with", true), cluster("without", false)
	// The control: without the redirect, probes of the root fail.
	deadline := time.After(10 * time.Second)
	for {
		_, c0 := without[0].snapshot()
		_, c1 := without[1].snapshot()
		_, s0 := without[0].first(RootName, 1, KindSuspect)
		_, s1 := without[1].first(RootName, 1, KindSuspect)
		if s0 || s1 {
			break
		}
		select {
		case <-c0:
		case <-c1:
		case <-deadline:
			t.Fatal("the agents without the redirect never suspected their root: the test's network reaches the advertised address")
		}
	}
	// Meanwhile the redirected agents probed their root several times
	// (each every other probe period): none failed.
	for _, r := range with {
		for _, k := range []Kind{KindSuspect, KindDead} {
			if e, ok := r.first(RootName, 1, k); ok {
				t.Errorf("a redirected agent: %v", e)
			}
		}
	}
}

var _ memberlist.NodeAwareTransport = redirectTransport{}
