package plan

import (
	"fmt"
	"testing"
)

// BenchmarkBuildSteps splits Build into the tree builder, indexing, and
// the backup and replica assignment.
func BenchmarkBuildSteps(b *testing.B) {
	for _, kind := range []Kind{{Shape: Greedy}, {Shape: KAry, K: 16}} {
		for _, n := range []int{100, 1_000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("tree/%s/n=%d", kind, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if kind.Shape == Greedy {
						buildGreedy(n, 0.035, 0.034)
					} else {
						buildKAry(n, kind.K)
					}
				}
			})
			pl, err := Build(kind, n, Params{Replicas: 3})
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("index/%s/n=%d", kind, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					q := &Plan{Kind: pl.Kind, Parent: pl.Parent, Order: pl.Order}
					if err := q.index(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("backups/%s/n=%d", kind, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					pl.assignBackupsAndReplicas(3)
				}
			})
		}
	}
}
