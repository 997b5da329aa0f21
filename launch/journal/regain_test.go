package journal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// A write that finds the journal's replica deposed waits for it to lead
// again: an unwatched journal's (a successor root's) at most Regain, then
// it fails with ErrNotLeader; a watched one's (NewWatch: the replicated
// front-end's, which holds its events meanwhile and steps aside when it
// cannot lead again) as long as the lead stays away, and the phase is
// committed once it comes back. Under load a recovery's suspend phase
// that met a leadership blip ended the job although the lead came back
// (chaos-interior, docs/chaos.md).
func TestJournalRegain(t *testing.T) {
	for _, watched := range []bool{false, true} {
		name := "unwatched"
		if watched {
			name = "watched"
		}
		t.Run(name, func(t *testing.T) {
			cfg := Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-test", N: 8, Replicas: 3}, Regain: 100 * time.Millisecond}
			g := newTestGroup(t, cfg, "node1", "node0")
			g.launchAll(t)
			if watched {
				NewWatch(g.j, WatchConfig{})
			}
			ctx := context.Background()
			r := g.j.Replica()
			if err := r.TransferLeadership(ctx, "node1", "node1"); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 5*time.Second, "the front-end's replica to step down", func() bool { return !r.IsLeader() })
			issued := time.Now()
			done := make(chan error, 1)
			g.j.Commit(RecoveryPhase{Epoch: 1, Stage: "suspend", Rank: 5, Record: raftstore.Recovery{Stage: "suspend"}}, done)
			if !watched {
				// node1 keeps the lead (no agent hands it back here).
				if err := <-done; !errors.Is(err, raftstore.ErrNotLeader) {
					t.Fatalf("unwatched commit while another replica leads: %v, want ErrNotLeader", err)
				}
				return
			}
			waitUntil(t, 5*time.Second, "ten times Regain since the commit", func() bool { return time.Since(issued) > 10*cfg.Regain })
			select {
			case err := <-done:
				t.Fatalf("the commit was answered while the replica was deposed: %v", err)
			default:
			}
			if err := g.agentLeader(t).TransferLeadership(ctx, "fe", "fe"); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the commit once the lead came back: %v", err)
			}
			var stage string
			g.j.FSM().View(func(s *raftstore.State) {
				if s.Recovery != nil {
					stage = s.Recovery.Stage
				}
			})
			if stage != "suspend" || g.j.Err() != nil {
				t.Errorf("the state's recovery at %q, the journal's error %v; want the suspend phase, no error", stage, g.j.Err())
			}
		})
	}
}

// A command the state machine refuses is committed again without its
// events, and its events one by one (refused), through a replica as
// through a solo log: a recovery record of an older epoch than the one
// recorded is refused, and its event is kept.
func TestJournalRefusedKeepsEvents(t *testing.T) {
	for _, solo := range []bool{false, true} {
		j := openCfg(t, Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-test", N: 8}, Solo: solo})
		ctx := context.Background()
		commit := func(epoch uint64) error {
			done := make(chan error, 1)
			j.Commit(RecoveryPhase{Epoch: epoch, Stage: "suspend", Rank: 5, Record: raftstore.Recovery{Stage: "suspend"}}, done)
			return <-done
		}
		if err := commit(2); err != nil {
			t.Fatalf("solo %v: epoch 2: %v", solo, err)
		}
		if err := commit(1); !errors.Is(err, raftstore.ErrRefused) {
			t.Errorf("solo %v: epoch 1 after epoch 2: %v, want ErrRefused", solo, err)
		}
		var details []string
		j.FSM().View(func(s *raftstore.State) {
			for _, ev := range s.Events {
				if ev.Kind == raftstore.EventRecovery {
					details = append(details, ev.Detail)
				}
			}
		})
		if len(details) != 2 || !strings.HasPrefix(details[0], "suspend: epoch 2") || !strings.HasPrefix(details[1], "suspend: epoch 1") {
			t.Errorf("solo %v: recovery events %q, want epoch 2's then epoch 1's", solo, details)
		}
		if st := j.Stats(); st.Refused != 2 {
			t.Errorf("solo %v: stats %+v, want 2 refused (the record with its event, then alone)", solo, st)
		}
		if err := j.Close(ctx, 0, ""); !errors.Is(err, raftstore.ErrRefused) {
			t.Errorf("solo %v: close: %v, want the journal's first error (ErrRefused)", solo, err)
		}
	}
}
