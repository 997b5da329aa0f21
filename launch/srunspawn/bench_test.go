package srunspawn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/slurm"
)

// TestStartModes compares the two start modes inside one `salloc -N 8 -n
// 16 --no-kill` allocation on an 8-node cluster, interleaved round by
// round (the order rotates): 8 Start calls in parallel, one StartGroup on
// the 8 nodes, and plain `srun -n 16 true` for reference. The agent stand-in
// is `cat >/dev/null`: it reads its stdin (a 256-byte payload) until EOF.
// For each mode it reports "up" (until every agent runs: all Start calls
// returned), "cycle" (up, then Close and Wait: the agents end on EOF) and
// the CPU time of the srun processes. Run with
//
//	FTLAUNCH_SRUN_BENCH=30 go test -run TestStartModes -v ./launch/srunspawn/
func TestStartModes(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("FTLAUNCH_SRUN_BENCH"))
	if rounds <= 0 {
		t.Skip("set FTLAUNCH_SRUN_BENCH=ROUNDS to measure the start modes")
	}
	chaostest.RequireSlurm(t)
	c := chaostest.Slurm(t, 8, slurm.Config{})
	a := allocate(t, c, 8, 16)
	if len(a.nodes) != 8 {
		t.Fatalf("allocation %s: want 8 nodes", a.list)
	}
	s := a.spawner(t, Options{CloseGrace: time.Minute, Logf: func(string, ...any) {}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	argv := []string{"sh", "-c", "exec cat >/dev/null"}
	payload := make([]byte, 256)

	type sample struct{ up, cycle, cpu time.Duration }
	type mode struct {
		name string
		run  func() (up time.Duration, err error)
	}
	// end closes the sessions (EOF: the agents exit) and waits for them.
	end := func(sess []*Session, outs []*output) error {
		for _, ss := range sess {
			ss.Close()
		}
		var first error
		for i, ss := range sess {
			if err := ss.Wait(); err != nil && first == nil {
				first = fmt.Errorf("%v; stderr %q", err, outs[i].stderr())
			}
			outs[i].done.Wait()
		}
		return first
	}
	modes := []mode{
		{"8 x Start", func() (time.Duration, error) {
			begin := time.Now()
			sess := make([]*Session, len(a.nodes))
			errs := make([]error, len(a.nodes))
			var wg sync.WaitGroup
			for i, n := range a.nodes {
				wg.Go(func() {
					ss, err := s.Start(ctx, n, argv, payload)
					if err == nil {
						sess[i] = ss.(*Session)
					}
					errs[i] = err
				})
			}
			wg.Wait()
			up := time.Since(begin)
			var live []*Session
			var outs []*output
			var first error
			for i, ss := range sess {
				if errs[i] != nil && first == nil {
					first = errs[i]
				}
				if ss != nil {
					live = append(live, ss)
					outs = append(outs, collect(ss.Stdout(), ss.Stderr()))
				}
			}
			if err := end(live, outs); first == nil {
				first = err
			}
			return up, first
		}},
		{"StartGroup(8)", func() (time.Duration, error) {
			begin := time.Now()
			ss, err := s.StartGroup(ctx, a.nodes, argv, payload)
			if err != nil {
				return 0, err
			}
			up := time.Since(begin)
			return up, end([]*Session{ss.(*Session)}, []*output{collect(ss.Stdout(), ss.Stderr())})
		}},
		{"srun -n 16 true", func() (time.Duration, error) {
			cmd := exec.CommandContext(ctx, a.srun, "-n", "16", "true")
			cmd.Env = append(os.Environ(), a.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return 0, fmt.Errorf("srun -n 16 true: %v: %s", err, out)
			}
			return 0, nil
		}},
	}

	samples := make([][]sample, len(modes))
	for r := 0; r < rounds; r++ {
		for k := range modes {
			i := (r + k) % len(modes)
			cpu0 := childCPU(t)
			begin := time.Now()
			up, err := modes[i].run()
			cycle := time.Since(begin)
			if err != nil {
				t.Fatalf("round %d, %s: %v", r, modes[i].name, err)
			}
			samples[i] = append(samples[i], sample{up: up, cycle: cycle, cpu: childCPU(t) - cpu0})
		}
	}

	med := func(xs []sample, f func(sample) time.Duration) time.Duration {
		v := make([]time.Duration, len(xs))
		for i, x := range xs {
			v[i] = f(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	t.Logf("%d rounds, interleaved; job %s on %s (salloc -N 8 -n 16 --no-kill)", rounds, a.job, a.list)
	t.Logf("%-16s %12s %12s %14s", "mode", "median up", "median cycle", "median srun CPU")
	var ups, cycles []time.Duration
	for i, m := range modes {
		up := med(samples[i], func(x sample) time.Duration { return x.up })
		cyc := med(samples[i], func(x sample) time.Duration { return x.cycle })
		cpu := med(samples[i], func(x sample) time.Duration { return x.cpu })
		ups, cycles = append(ups, up), append(cycles, cyc)
		upStr := ms(up)
		if up == 0 {
			upStr = "-"
		}
		t.Logf("%-16s %12s %12s %14s", m.name, upStr, ms(cyc), ms(cpu))
	}
	t.Logf("8 x Start / StartGroup: up %.2fx, cycle %.2fx; StartGroup cycle / srun -n 16 true: %.2fx",
		float64(ups[0])/float64(ups[1]), float64(cycles[0])/float64(cycles[1]), float64(cycles[1])/float64(cycles[2]))
}

// childCPU is the user+system time of this process's reaped children.
func childCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
