package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// BenchmarkUpDown measures bringing a cluster up and down. Run with
//
//	go test -run '^$' -bench UpDown -benchtime 5x ./chaos/cluster
//
// It reports up-s and down-s: seconds per Up and per Down.
func BenchmarkUpDown(b *testing.B) {
	requireEmulation(b)
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			cfg := testConfig(b)
			ctx := context.Background()
			var up, down time.Duration
			for b.Loop() {
				start := time.Now()
				c, err := upFree(ctx, cfg, n)
				if err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := c.Down(ctx); err != nil {
					b.Fatal(err)
				}
				up += mid.Sub(start)
				down += time.Since(mid)
			}
			b.ReportMetric(up.Seconds()/float64(b.N), "up-s")
			b.ReportMetric(down.Seconds()/float64(b.N), "down-s")
		})
	}
}

// upFree is Up on the first free prefix among a few random ones.
func upFree(ctx context.Context, cfg Config, n int) (*Cluster, error) {
	var err error
	for try := 0; try < 10; try++ {
		cfg.Prefix = randomPrefix()
		var c *Cluster
		c, err = Up(ctx, cfg, n)
		if !errors.Is(err, ErrPrefixInUse) {
			return c, err
		}
	}
	return nil, err
}
