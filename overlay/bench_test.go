package overlay_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay"
)

const (
	benchNodes   = 1024
	benchPerNode = 16
	benchValue   = 64
)

// countdown closes done when the expected number of results arrived.
type countdown struct {
	left atomic.Int64
	bad  atomic.Int64
	done chan struct{}
}

// benchCluster starts a k-ary tree of benchNodes nodes hosting benchPerNode
// members each (block placement) whose results go to the current countdown.
func benchCluster(b *testing.B, k int, check func(overlay.Result) bool) (*cluster, *atomic.Pointer[countdown]) {
	members := make([][]int, benchNodes)
	for i := range members {
		for j := range benchPerNode {
			members[i] = append(members[i], i*benchPerNode+j)
		}
	}
	var cur atomic.Pointer[countdown]
	c := &cluster{}
	c.start(b, tree{karyTree(benchNodes, k), members}, overlay.MemConfig{Inbox: 1 << 14}, nil, func(r overlay.Result) {
		cd := cur.Load()
		if r.Err != nil || !check(r) {
			cd.bad.Add(1)
		}
		if cd.left.Add(-1) == 0 {
			close(cd.done)
		}
	})
	return c, &cur
}

func (c *cluster) bytesRecv() (total, most uint64) {
	for _, e := range c.engs {
		s := e.Stats().BytesRecv
		total += s
		most = max(most, s)
	}
	return total, most
}

func arm(cur *atomic.Pointer[countdown], n int) *countdown {
	cd := &countdown{done: make(chan struct{})}
	cd.left.Store(int64(n))
	cur.Store(cd)
	return cd
}

func benchValues() [][]byte {
	vals := make([][]byte, benchNodes*benchPerNode)
	for m := range vals {
		v := make([]byte, benchValue)
		copy(v, fmt.Sprintf("addr-of-member-%d", m))
		vals[m] = v
	}
	return vals
}

// BenchmarkAllgather: every one of 16,384 members contributes 64 bytes;
// every member gets all of them.
func BenchmarkAllgather(b *testing.B) {
	for _, k := range []int{8, 32} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			total := benchNodes * benchPerNode
			c, cur := benchCluster(b, k, func(r overlay.Result) bool { return len(r.Entries) == total })
			vals := benchValues()
			before, _ := c.bytesRecv()
			seq := uint64(0)
			for b.Loop() {
				cd := arm(cur, total)
				id := overlay.CollID{Seq: seq}
				seq++
				for i, ms := range c.tr.members {
					for _, m := range ms {
						if err := c.engs[i].Contribute(id, overlay.OpAllgather, m, vals[m]); err != nil {
							b.Fatal(err)
						}
					}
				}
				<-cd.done
				if cd.bad.Load() != 0 {
					b.Fatalf("%d wrong results", cd.bad.Load())
				}
			}
			after, most := c.bytesRecv()
			b.ReportMetric(float64(after-before)/float64(b.N)/benchNodes, "B/node")
			b.ReportMetric(float64(most)/float64(b.N), "maxB/node")
		})
	}
}

// BenchmarkFenceGet: every member puts one 64-byte value (16 puts per
// node), all members fence, then every node gets all 16,384 keys locally,
// as MPICH's address exchange does.
func BenchmarkFenceGet(b *testing.B) {
	for _, k := range []int{8, 32} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			total := benchNodes * benchPerNode
			c, cur := benchCluster(b, k, func(overlay.Result) bool { return true })
			vals := benchValues()
			before, _ := c.bytesRecv()
			var fenceTime, getTime time.Duration
			seq := uint64(0)
			keys := make([]string, total)
			for m := range keys {
				keys[m] = fmt.Sprintf("pmi-addr-%d", m)
			}
			for b.Loop() {
				// A fresh board each time, so the heap does not grow with
				// b.N; ResetKV itself costs nothing.
				for _, e := range c.engs {
					e.ResetKV()
				}
				t0 := time.Now()
				cd := arm(cur, total)
				id := overlay.CollID{Seq: seq}
				seq++
				for i, ms := range c.tr.members {
					for _, m := range ms {
						if err := c.engs[i].Put(keys[m], vals[m]); err != nil {
							b.Fatal(err)
						}
					}
				}
				for i, ms := range c.tr.members {
					for _, m := range ms {
						if err := c.engs[i].Contribute(id, overlay.OpFence, m, nil); err != nil {
							b.Fatal(err)
						}
					}
				}
				<-cd.done
				t1 := time.Now()
				var wg sync.WaitGroup
				var missing atomic.Int64
				workers := runtime.GOMAXPROCS(0)
				for w := range workers {
					wg.Go(func() {
						for i := w; i < len(c.engs); i += workers {
							for m, key := range keys {
								v, err := c.engs[i].Get(key)
								if err != nil || len(v) != benchValue || v[len("addr-of-member-")] != vals[m][len("addr-of-member-")] {
									missing.Add(1)
								}
							}
						}
					})
				}
				wg.Wait()
				if missing.Load() != 0 {
					b.Fatalf("%d gets failed", missing.Load())
				}
				fenceTime += t1.Sub(t0)
				getTime += time.Since(t1)
			}
			after, most := c.bytesRecv()
			b.ReportMetric(float64(after-before)/float64(b.N)/benchNodes, "B/node")
			b.ReportMetric(float64(most)/float64(b.N), "maxB/node")
			b.ReportMetric(float64(fenceTime.Milliseconds())/float64(b.N), "fence-ms")
			b.ReportMetric(float64(getTime.Nanoseconds())/float64(b.N)/float64(benchNodes*total), "ns/get")
		})
	}
}
