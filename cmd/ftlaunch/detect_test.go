package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// TestStoppedAgentBelowRootChildByGossip (#27 item 3): the agent of
// node2, below node0 (a child of the root) under kary:2, is SIGSTOPped;
// gossip's word and the silence of its link to node0 declare it lost
// (docs/membership.md: 2.0-2.25 s on a quiet machine), before its link's
// heartbeat timeout (proto.LinkTimeout: 5 s) would, and it starts again
// on the spare. The failure committed is gossip's (proto.ErrGossipDead),
// and it falls short of the heartbeat's timeout after the stop: a
// behaviour, not a speed (the bound is generous for a loaded machine).
func TestStoppedAgentBelowRootChildByGossip(t *testing.T) {
	if testing.Short() {
		t.Skip("an 8-rank job with a stopped agent")
	}
	cmd, out, _, dir, ck := runRing(t, "rank", 8, "--test-nodes", "5", "--spare-nodes", "1", "--tree", "kary:2")
	stopped := time.Now()
	stopAgent(t, ck, "node2")
	recoveries(t, dir, 1)
	ringDone(t, cmd, out, ck)
	in := ftlaunch(t, "", "inspect", "--state-dir", dir, "--json")
	var job struct {
		Recoveries []struct {
			Failure struct {
				Time   time.Time `json:"time"`
				Node   string    `json:"node"`
				Detail string    `json:"detail"`
			} `json:"failure"`
		} `json:"recoveries"`
	}
	if err := json.Unmarshal([]byte(in.stdout), &job); err != nil || len(job.Recoveries) == 0 {
		t.Fatalf("inspect: %v\n%s%s", err, in.stdout, in.stderr)
	}
	f := job.Recoveries[0].Failure
	if !strings.Contains(f.Detail, proto.ErrGossipDead.Error()) {
		t.Errorf("the failure is not gossip's word and the link's silence: %+v", f)
	}
	// The heartbeat would have ended the link LinkTimeout after the last
	// frame, at least LinkTimeout - UplinkPing after the stop.
	hb := time.Second
	if took := f.Time.Sub(stopped); took >= proto.LinkTimeout(hb)-proto.UplinkPing(hb) {
		t.Errorf("declared lost %v after the stop: not before the heartbeat's timeout", took)
	} else {
		t.Logf("declared lost %v after the stop", took.Round(time.Millisecond))
	}
}
