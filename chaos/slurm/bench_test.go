package slurm

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkUpDown measures bringing a Slurm cluster up (until every node is
// idle) and down (until every process has exited).
func BenchmarkUpDown(b *testing.B) {
	requireSlurm(b)
	for _, n := range []int{4, 8} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			cfg := testConfig(b)
			ctx := context.Background()
			var up, down time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				c, err := upFree(ctx, cfg, n)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := c.Down(ctx); err != nil {
					b.Fatal(err)
				}
				up += t1.Sub(t0)
				down += time.Since(t1)
			}
			b.ReportMetric(up.Seconds()/float64(b.N), "up-s/op")
			b.ReportMetric(down.Seconds()/float64(b.N), "down-s/op")
		})
	}
}

// BenchmarkSrun16 measures `srun -n 16 true` inside one 8-node, 16-task
// allocation: b.N steps in a row, timed inside the allocation.
func BenchmarkSrun16(b *testing.B) {
	requireSlurm(b)
	c := upTest(b, testConfig(b), 8)
	script := fmt.Sprintf(`for i in $(seq %d); do s=$(date +%%s%%N); srun -n 16 true || exit 1; e=$(date +%%s%%N); echo $((e-s)); done`, b.N)
	b.ResetTimer()
	res, err := c.Alloc(context.Background(), 8, 16, false, "sh", "-c", script)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if res.ExitCode != 0 {
		b.Fatalf("salloc exit %d: %s", res.ExitCode, res.Stderr)
	}
	var ns []int
	for _, f := range strings.Fields(string(res.Stdout)) {
		v, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("step time %q: %v", f, err)
		}
		ns = append(ns, v)
	}
	if len(ns) != b.N {
		b.Fatalf("%d step times for %d steps", len(ns), b.N)
	}
	slices.Sort(ns)
	b.ReportMetric(float64(ns[len(ns)/2])/1e6, "median-ms/step")
	b.ReportMetric(float64(ns[len(ns)-1])/1e6, "max-ms/step")
}
