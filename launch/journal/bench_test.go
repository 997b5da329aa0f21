package journal

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// BenchmarkOpen measures, in real time, a single-voter journal from Open
// to Ready (files created, leader elected, job committed): ms-in-Open is
// what the launch waits for, ms-to-ready what it does not. Two timings:
// the default (raftstore.DefaultTiming(1), 10 ms timers) and raft's 5 ms
// floor; terms/op counts election rounds.
func BenchmarkOpen(b *testing.B) {
	for _, tc := range []struct {
		name   string
		timing raftstore.Timing
	}{{"timers=10ms", raftstore.Timing{}}, {"timers=5ms", raftstore.Timing{
		HeartbeatTimeout: 5 * time.Millisecond, ElectionTimeout: 5 * time.Millisecond,
		LeaderLeaseTimeout: 5 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	}}} {
		b.Run(tc.name, func(b *testing.B) {
			var inOpen, toReady, worst time.Duration
			var terms uint64
			for i := range b.N {
				dir := b.TempDir()
				start := time.Now()
				j, err := Open(context.Background(), Config{StateDir: dir, Node: "fe", Timing: tc.timing, Job: Job{ID: fmt.Sprintf("ft-%d", i), N: 8}})
				if err != nil {
					b.Fatal(err)
				}
				inOpen += time.Since(start)
				if err := j.Ready(context.Background()); err != nil {
					b.Fatal(err)
				}
				d := time.Since(start)
				toReady += d
				worst = max(worst, d)
				b.StopTimer()
				terms += j.Replica().Raft().CurrentTerm() - 1
				if err := j.Close(context.Background(), 0, ""); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(inOpen.Microseconds())/1000/float64(b.N), "ms-in-Open")
			b.ReportMetric(float64(toReady.Microseconds())/1000/float64(b.N), "ms-to-ready")
			b.ReportMetric(float64(worst.Microseconds())/1000, "ms-worst")
			b.ReportMetric(float64(terms)/float64(b.N), "terms/op")
		})
	}
}

// BenchmarkNodeTable16K measures the commit of the node table of 16,384
// ranks on 256 nodes, through the journal (NodeTable, then Sync until it
// is committed), on 1 replica and on 3 replicas (the journal's and two
// more in the same process, over raft's TCP transport on 127.0.0.1, each
// with its own bbolt file). Each iteration publishes a table with new
// I-tuples. Reported: entries/op, the raft entries one table took, and
// the bytes of the UpdateRanks entries per table.
func BenchmarkNodeTable16K(b *testing.B) {
	const ranks, per = 16384, 64
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			dir := b.TempDir()
			cfg := Config{StateDir: dir, Node: "r0", Job: Job{ID: "ft-bench", N: ranks}}
			if replicas > 1 {
				others := tcpGroup(b, &cfg, dir, replicas)
				defer func() {
					for _, r := range others {
						if err := r.Shutdown(); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			j, err := Open(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := j.Close(context.Background(), 0, ""); err != nil {
					b.Error(err)
				}
			}()
			ctx := context.Background()
			if err := j.Ready(ctx); err != nil {
				b.Fatal(err)
			}
			nodes := make([]string, ranks)
			var names []string
			for r := range ranks {
				nodes[r] = fmt.Sprintf("node%04d", r/per)
				if r%per == 0 {
					names = append(names, nodes[r])
				}
			}
			j.Plan(FlatPlan(names))
			for n := range names {
				var rs, pids []int
				for r := n * per; r < (n+1)*per; r++ {
					rs, pids = append(rs, r), append(pids, 4000+r)
				}
				j.RanksStarted(names[n], rs, pids)
			}
			if err := j.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			var entries int
			var bytes uint64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				its := make([][]byte, ranks)
				for r := range its {
					its[r] = fmt.Appendf(nil, "10.1.%d.%d:%d", r/per/256, r/per%256, 20000+i*per+r%per)
				}
				before := j.Stats().Entries
				b.StartTimer()
				j.NodeTable(nodes, its)
				if err := j.Sync(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				entries += j.Stats().Entries - before
				bytes += tableBytes(nodes, its)
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(entries)/float64(b.N), "entries/op")
			b.ReportMetric(float64(bytes)/float64(b.N), "entry-bytes/op")
		})
	}
}

// tcpGroup makes cfg a member of a group of n voters over raft's TCP
// transport on 127.0.0.1 and starts the n-1 others (raftstore replicas
// in the same job directory). The others' timers are long, so the
// journal's replica is the one elected.
func tcpGroup(b *testing.B, cfg *Config, dir string, n int) []*raftstore.Replica {
	var trans []*raft.NetworkTransport
	var peers []raft.Server
	for i := range n {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 2*time.Second, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tr.Close() })
		trans = append(trans, tr)
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("r%d", i)), Address: tr.LocalAddr()})
	}
	cfg.Transport, cfg.Peers = trans[0], peers
	slow := raftstore.DefaultTiming(n)
	slow.HeartbeatTimeout, slow.ElectionTimeout = 10*time.Second, 10*time.Second
	var others []*raftstore.Replica
	for i := 1; i < n; i++ {
		r, err := raftstore.Open(raftstore.Config{StateDir: JobDir(dir, cfg.Job.ID), Name: fmt.Sprintf("r%d", i), Transport: trans[i], Peers: peers, Timing: slow})
		if err != nil {
			b.Fatal(err)
		}
		others = append(others, r)
	}
	return others
}

// tableBytes is the size of the UpdateRanks entries that carry a table
// of these rows, MaxRows rows per entry.
func tableBytes(nodes []string, its [][]byte) uint64 {
	var total uint64
	for first := 0; first < len(its); first += DefaultMaxRows {
		c := &raftstore.UpdateRanks{}
		for r := first; r < min(first+DefaultMaxRows, len(its)); r++ {
			c.Ranks = append(c.Ranks, raftstore.Rank{Rank: r, Node: nodes[r], PID: 4000 + r, ITuple: its[r], Incarnation: 1, State: raftstore.RankRunning})
		}
		total += uint64(len(raftstore.Encode(c)))
	}
	return total
}
