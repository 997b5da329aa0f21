package raftstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkCommitNodeTable commits a node table of 16,384 ranks on three
// replicas (raft's in-memory transport, real bbolt files with fsync), in
// batches of the given size with up to 8 batches in flight, as subtree
// reports would arrive. Each iteration rewrites every row with a new
// incarnation. Reported: entries/op, the raft log entries one table took.
func BenchmarkCommitNodeTable(b *testing.B) {
	const ranks = 16384
	for _, batch := range []int{256, 1024, 4096} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			g := newGroup(b, 3, nil)
			r := g.replicas[g.leader(10*time.Second, nil)]
			ctx := context.Background()
			setJob(b, r, ranks)
			var entries uint64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				var cmds []*UpdateRanks
				for first := 0; first < ranks; first += batch {
					cmds = append(cmds, rankBatch(first, batch, uint64(i+1)))
				}
				before := r.Raft().LastIndex()
				b.StartTimer()
				if err := applyAll(ctx, r, cmds, 8); err != nil {
					b.Fatal(err)
				}
				entries += r.Raft().LastIndex() - before
			}
			b.StopTimer()
			b.ReportMetric(float64(entries)/float64(b.N), "entries/op")
			var bytes int
			for _, c := range []*UpdateRanks{rankBatch(0, batch, 1)} {
				bytes = len(Encode(c))
			}
			b.ReportMetric(float64(bytes)/float64(batch), "bytes/rank")
		})
	}
}

// applyAll applies cmds with at most inflight of them waiting at once.
func applyAll(ctx context.Context, r *Replica, cmds []*UpdateRanks, inflight int) error {
	sem := make(chan struct{}, inflight)
	errs := make(chan error, len(cmds))
	var wg sync.WaitGroup
	for _, c := range cmds {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := r.Apply(ctx, c); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkSingleVoterElection measures, in real time, how long a new
// single-voter replica takes from Open (creating its bbolt file) to
// reporting itself leader.
func BenchmarkSingleVoterElection(b *testing.B) {
	var total, worst, opening time.Duration
	for range b.N {
		addr, tr := raft.NewInmemTransport("")
		start := time.Now()
		r, err := Open(Config{StateDir: b.TempDir(), Name: "solo", Transport: tr, Peers: []raft.Server{{Suffrage: raft.Voter, ID: "solo", Address: addr}}})
		if err != nil {
			b.Fatal(err)
		}
		opening += time.Since(start)
		if l := <-r.Leadership(); !l.IsLeader {
			b.Fatalf("%+v", l)
		}
		d := time.Since(start)
		total += d
		worst = max(worst, d)
		b.StopTimer()
		if err := r.Shutdown(); err != nil {
			b.Fatal(err)
		}
		tr.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-leader")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms-worst")
	b.ReportMetric(float64(opening.Microseconds())/1000/float64(b.N), "ms-in-Open")
}

// BenchmarkFailover measures, in real time on three replicas, the time
// from the leader's shutdown to a new leader (default timers: heartbeat =
// election = 275 ms, lease 275 ms).
func BenchmarkFailover(b *testing.B) {
	var total, worst time.Duration
	for range b.N {
		b.StopTimer()
		g := newGroup(b, 3, nil)
		l := g.leader(10*time.Second, nil)
		b.StartTimer()
		start := time.Now()
		if err := g.replicas[l].Shutdown(); err != nil {
			b.Fatal(err)
		}
		g.leader(10*time.Second, map[int]bool{l: true})
		d := time.Since(start)
		total += d
		worst = max(worst, d)
		b.StopTimer()
		g.shutdown()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-new-leader")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms-worst")
}
