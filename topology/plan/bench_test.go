package plan_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

var benchSizes = []int{100, 1_000, 10_000, 100_000}

// BenchmarkBuild measures a whole Build: tree, indexes, backups, replicas.
func BenchmarkBuild(b *testing.B) {
	for _, name := range []string{"greedy", "kary:16", "2level", "binomial"} {
		k, err := plan.ParseKind(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := plan.Build(k, n, plan.Params{Seq: 0.035, Rem: 0.034, Replicas: 3}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkModelTime(b *testing.B) {
	pl, err := plan.Build(plan.Kind{Shape: plan.Greedy}, 100_000, plan.Params{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.ModelTime(plan.Model{Seq: 0.035, Rem: 0.034}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSimulateRun is the cost of one simulated launch of 100,000 nodes.
func BenchmarkSimulateRun(b *testing.B) {
	pl, err := plan.Build(plan.Kind{Shape: plan.Greedy}, 100_000, plan.Params{})
	if err != nil {
		b.Fatal(err)
	}
	rem := plan.RemDist{Samples: []float64{0.03, 0.034, 0.04, 0.2}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := plan.Simulate(context.Background(), pl, plan.SimConfig{Seq: 0.035, Rem: rem, Runs: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
