package plan

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
)

// RemDist is the distribution of the remote launch time REM in a
// simulation: if Samples is non-empty every launch draws one of them
// uniformly with replacement, else every launch takes Const seconds.
// A RemDist is a plain value; Simulate does not modify it.
type RemDist struct {
	Const   float64
	Samples []float64
}

func (d RemDist) validate() error {
	if len(d.Samples) == 0 {
		return checkSeconds("rem", d.Const)
	}
	for i, s := range d.Samples {
		if err := checkSeconds(fmt.Sprintf("rem sample %d", i+1), s); err != nil {
			return err
		}
	}
	return nil
}

func (d RemDist) draw(r *rand.Rand) float64 {
	if len(d.Samples) == 0 {
		return d.Const
	}
	return d.Samples[r.IntN(len(d.Samples))]
}

// ParseRemSamples reads REM samples, one value in seconds per line, from
// r; name (usually the file name) is used in errors, which also give the
// line number. Blank lines and lines starting with '#' are skipped.
func ParseRemSamples(r io.Reader, name string) (RemDist, error) {
	sc := bufio.NewScanner(r)
	var out []float64
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return RemDist{}, fmt.Errorf("parse %s line %d: %q is not a number of seconds", name, line, s)
		}
		if err := checkSeconds("rem sample", v); err != nil {
			return RemDist{}, fmt.Errorf("parse %s line %d: %w", name, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return RemDist{}, fmt.Errorf("read %s after line %d: %w", name, line, err)
	}
	if len(out) == 0 {
		return RemDist{}, fmt.Errorf("parse %s: no samples", name)
	}
	return RemDist{Samples: out}, nil
}

// LoadRemSamples reads REM samples from the file at path (see
// ParseRemSamples).
func LoadRemSamples(path string) (RemDist, error) {
	f, err := os.Open(path)
	if err != nil {
		return RemDist{}, fmt.Errorf("open rem samples: %w", err)
	}
	defer f.Close()
	return ParseRemSamples(f, path)
}

// SimConfig configures Simulate. Times are in seconds.
type SimConfig struct {
	Seq float64 // gap between successive launch starts on one lane of a node
	Rem RemDist // time from a launch's start until the child is up
	// Concurrency is the number of lanes per node (0 means 1): child q
	// (0-based, within its batch) starts Seq*floor(q/Concurrency) after
	// the batch starts, so up to Concurrency launches start together.
	Concurrency int
	// Batch and BatchWait batch leaf launchers as in Model: the next
	// batch starts BatchWait after the last child of the batch is up.
	Batch     int
	BatchWait float64
	Runs      int    // number of independent runs, >= 1
	Seed      uint64 // seed of the math/rand/v2 PCG generator
	// Hand is the handoff: a node other than the root starts launching
	// its children Hand after it is up (its report reaching the root and
	// its job coming back down). 0: at once, as in Model.
	Hand float64
	// Shared is the contention term (the zero value: none): every
	// launch's Work is served by a processor-sharing pool of Cores CPUs
	// from its start, and the child is up Rem - Work after its work is
	// done (Rem is an uncontended launch, its work included). Batching
	// and Shared do not go together.
	Shared Shared
}

// Shared is the launches' shared resource: Cores CPUs that every launch
// in progress shares, each launch needing Work CPU-seconds of them (the
// ssh handshakes, sshd and the agent's start on hosts that share one
// machine's CPUs). The zero value models no sharing: each host has its
// own CPUs and the parent's own part is SEQ.
//
// The CPUs are shared max-min fairly (processor sharing with caps): all
// the work in progress progresses at the same speed unless its cap is
// lower, and what a capped piece leaves goes to the others. A launch's
// cap is max(1, Work/REM) cores, so that a launch alone takes REM, its
// work included, also where its work is more than REM (the parent's ssh
// client and the child's sshd and agent are processes of their own). The
// handoff (SimConfig.Hand) and After are capped at one core, Rate at
// Rate cores per agent.
type Shared struct {
	Cores int
	Work  float64
	// After is the CPU-seconds an agent takes of the pool right after
	// it is up (its job, its ranks' start, its links), alongside the
	// launches still in progress; nothing waits for it.
	After float64
	// Rate is the CPU, in cores, each agent other than the root takes of
	// the pool from the moment it is up until the launch ends (its links'
	// heartbeats, the job's gossip as the others join, its ranks):
	// nothing waits for it, and the longer the launch keeps agents up
	// while others are still launched, the more it costs.
	Rate float64
}

func (s Shared) validate() error {
	if s.Cores < 0 {
		return fmt.Errorf("shared cores = %d: must be >= 0", s.Cores)
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"shared work", s.Work}, {"shared work after", s.After}, {"shared work rate", s.Rate}} {
		if err := checkSeconds(c.name, c.v); err != nil {
			return err
		}
	}
	return nil
}

// SimResult summarises the launch times of the runs, in seconds.
// Median is the middle of the sorted times (the mean of the two middle
// ones for an even count); P95 and P99 are the nearest-rank 95th and
// 99th percentiles, the ceil(0.95*Runs)-th and ceil(0.99*Runs)-th
// smallest times.
type SimResult struct {
	Runs                             int
	Median, P95, P99, Min, Max, Mean float64
	Times                            []float64 // per run, in run order
}

// event is a node coming up at time t; with Shared, also a launch
// reaching the shared CPUs and, in the pool, a piece of work whose time
// is the pool's virtual time at which it is done.
type event struct {
	t    float64
	seq  uint64 // tie-break: equal times in scheduling order
	node int32
	kind uint8 // with Shared: evUp or evStart; in the pool a job* kind
}

// Kinds of events with Shared.
const (
	evUp    uint8 = iota // node is up
	evStart              // node's launch reaches the shared CPUs
)

// Kinds of work in the shared pool.
const (
	jobLaunch uint8 = iota // node's launch (capped at the launch's cores)
	jobAfter               // an agent's work once up
	jobHand                // node's handoff: it begins launching its children when done
)

type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		up := (i - 1) / 2
		if !s.less(i, up) {
			break
		}
		s[i], s[up] = s[up], s[i]
		i = up
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if r := l + 1; r < len(s) && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// simulator holds the per-run state of a simulation; it is reused across
// runs and owned by one goroutine.
type simulator struct {
	pl      *Plan
	cfg     SimConfig
	rng     *rand.Rand
	h       eventHeap
	nseq    uint64
	next    []int32   // batched launchers: index of the next child to start
	pending []int32   // batched launchers: children of the current batch not yet up
	latest  []float64 // batched launchers: latest up time in the current batch
	// With Shared: the work holding the shared CPUs, as events whose
	// time is the pool's virtual time (CPU-seconds each piece of work of
	// the pool received) at which it is done: launches in pool (capped
	// at par cores), the rest in unit (capped at one core). lat[v] is how
	// long after its launch's work node v is up.
	pool, unit eventHeap
	par        float64
	lat        []float64
}

// hand is the handoff of node v: none for the root.
func (sm *simulator) hand(v int32) float64 {
	if v == 0 {
		return 0
	}
	return sm.cfg.Hand
}

// launchCores is the cap of one launch's work in the pool: max(1,
// Work/REM) cores, REM the constant or the samples' median, so that a
// launch alone takes REM.
func launchCores(cfg SimConfig) float64 {
	rem := cfg.Rem.Const
	if len(cfg.Rem.Samples) > 0 {
		s := slices.Clone(cfg.Rem.Samples)
		slices.Sort(s)
		rem = s[len(s)/2]
	}
	if w := cfg.Shared.Work; rem > 0 && w > rem {
		return w / rem
	}
	return 1
}

// shareRates is how fast each piece of work progresses (cores) when
// cores CPUs are shared max-min fairly by nl launches capped at par
// cores, nu pieces capped at one core and na up agents capped at rate
// cores each.
func shareRates(cores float64, nl int, par float64, nu int, na int, rate float64) (rl, ru float64) {
	type class struct {
		cap float64
		n   float64
	}
	cs := [3]class{{par, float64(nl)}, {1, float64(nu)}, {rate, float64(na)}}
	demand := 0.0
	for _, c := range cs {
		demand += c.cap * c.n
	}
	if demand <= cores {
		return par, 1
	}
	// The level l with sum of n*min(cap, l) = cores: take the classes by
	// cap, each below the level getting its cap.
	slices.SortFunc(cs[:], func(a, b class) int { return cmp.Compare(a.cap, b.cap) })
	left, above := cores, 0.0
	for _, c := range cs {
		above += c.n
	}
	level := 0.0
	for _, c := range cs {
		if c.n == 0 {
			continue
		}
		if l := left / above; l <= c.cap {
			level = l
			break
		}
		left -= c.cap * c.n
		above -= c.n
		level = c.cap
	}
	return min(par, level), min(1, level)
}

// runShared simulates one launch with the contention term: launches, the
// handoffs and the agents' work share the pool's cores (processor
// sharing with caps, Shared); every agent, once up, adds its work After
// and takes its Rate until the end.
func (sm *simulator) runShared() float64 {
	pl, sh := sm.pl, sm.cfg.Shared
	cores := float64(sh.Cores)
	sm.h = sm.h[:0]
	sm.pool = sm.pool[:0]
	sm.unit = sm.unit[:0]
	sm.h.push(event{t: 0, seq: 0, node: 0, kind: evUp})
	sm.nseq = 1
	n := pl.N()
	worst, now, vl, vu := 0.0, 0.0, 0.0, 0.0
	up, live := 0, 0 // nodes up; agents taking their Rate
	push := func(h *eventHeap, t float64, node int32, kind uint8) {
		h.push(event{t: t, seq: sm.nseq, node: node, kind: kind})
		sm.nseq++
	}
	// begin starts node v's launches of its children at time t.
	begin := func(v int32, t float64) {
		c := sm.cfg.Concurrency
		for q, ch := range pl.Children(int(v)) {
			push(&sm.h, t+sm.cfg.Seq*float64(q/c), ch, evStart)
		}
	}
	for up < n {
		rl, ru := shareRates(cores, len(sm.pool), sm.par, len(sm.unit), live, sh.Rate)
		done, fromPool := math.Inf(1), false
		if len(sm.pool) > 0 {
			done, fromPool = now+(sm.pool[0].t-vl)/rl, true
		}
		if len(sm.unit) > 0 {
			if d := now + (sm.unit[0].t-vu)/ru; d < done {
				done, fromPool = d, false
			}
		}
		if len(sm.h) > 0 && sm.h[0].t <= done {
			e := sm.h.pop()
			vl += (e.t - now) * rl
			vu += (e.t - now) * ru
			now = e.t
			if e.kind == evStart {
				sm.lat[e.node] = max(sm.cfg.Rem.draw(sm.rng)-sh.Work/sm.par, 0)
				push(&sm.pool, vl+sh.Work, e.node, jobLaunch)
				continue
			}
			worst = max(worst, e.t)
			up++
			if e.node != 0 {
				if sh.After > 0 {
					push(&sm.unit, vu+sh.After, -1, jobAfter)
				}
				if sh.Rate > 0 {
					live++
				}
			}
			switch {
			case len(pl.Children(int(e.node))) == 0:
			case e.node == 0 || sm.cfg.Hand == 0:
				begin(e.node, e.t)
			default:
				push(&sm.unit, vu+sm.cfg.Hand, e.node, jobHand)
			}
			continue
		}
		var j event
		if fromPool {
			j = sm.pool.pop()
			vl, vu = j.t, vu+(done-now)*ru
		} else {
			j = sm.unit.pop()
			vl, vu = vl+(done-now)*rl, j.t
		}
		now = done
		switch j.kind {
		case jobLaunch:
			push(&sm.h, done+sm.lat[j.node], j.node, evUp)
		case jobHand:
			begin(j.node, done)
		}
	}
	return worst
}

// startBatch starts v's children cs[lo:hi] at time s.
func (sm *simulator) startBatch(v int32, cs []int32, lo, hi int, s float64) {
	c := sm.cfg.Concurrency
	for q := lo; q < hi; q++ {
		start := s + sm.cfg.Seq*float64((q-lo)/c)
		sm.h.push(event{t: start + sm.cfg.Rem.draw(sm.rng), seq: sm.nseq, node: cs[q]})
		sm.nseq++
	}
	sm.next[v] = int32(hi)
	sm.pending[v] = int32(hi - lo)
	sm.latest[v] = math.Inf(-1)
}

// run simulates one launch and returns the time the last node is up.
func (sm *simulator) run() float64 {
	pl, b := sm.pl, sm.cfg.Batch
	sm.h = sm.h[:0]
	sm.h.push(event{t: 0, seq: 0, node: 0})
	sm.nseq = 1
	worst := 0.0
	for len(sm.h) > 0 {
		e := sm.h.pop()
		v := e.node
		worst = max(worst, e.t)
		if p := pl.Parent[v]; p >= 0 && sm.next[p] > 0 {
			// v belongs to a batch of its batched parent p.
			sm.pending[p]--
			sm.latest[p] = max(sm.latest[p], e.t)
			if cs := pl.Children(int(p)); sm.pending[p] == 0 && int(sm.next[p]) < len(cs) {
				lo := int(sm.next[p])
				sm.startBatch(p, cs, lo, min(lo+b, len(cs)), sm.latest[p]+sm.cfg.BatchWait)
			}
		}
		cs := pl.Children(int(v))
		if len(cs) == 0 {
			continue
		}
		if pl.batched(int(v), b) {
			sm.startBatch(v, cs, 0, b, e.t+sm.hand(v))
			continue
		}
		c := sm.cfg.Concurrency
		for q, ch := range cs {
			start := e.t + sm.hand(v) + sm.cfg.Seq*float64(q/c)
			sm.h.push(event{t: start + sm.cfg.Rem.draw(sm.rng), seq: sm.nseq, node: ch})
			sm.nseq++
		}
	}
	return worst
}

// Simulate runs cfg.Runs discrete-event simulations of launching pl and
// summarises their launch times. Each node serializes its own launch
// starts (Seq apart on each of its Concurrency lanes); each launch takes a
// REM drawn from cfg.Rem. With a constant REM, Concurrency 1 and the same
// batching, every run equals pl.ModelTime exactly. The result depends only
// on (pl, cfg). Simulate checks ctx between runs and returns ctx's error
// if it is done. It runs on the caller's goroutine.
func Simulate(ctx context.Context, pl *Plan, cfg SimConfig) (SimResult, error) {
	if cfg.Runs < 1 {
		return SimResult{}, fmt.Errorf("simulate %s plan: runs = %d: must be >= 1", pl.Kind, cfg.Runs)
	}
	if cfg.Concurrency < 0 {
		return SimResult{}, fmt.Errorf("simulate %s plan: concurrency = %d: must be >= 1", pl.Kind, cfg.Concurrency)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if err := (Model{Seq: cfg.Seq, Batch: cfg.Batch, BatchWait: cfg.BatchWait}).Validate(); err != nil {
		return SimResult{}, fmt.Errorf("simulate %s plan: %w", pl.Kind, err)
	}
	if err := cfg.Rem.validate(); err != nil {
		return SimResult{}, fmt.Errorf("simulate %s plan: %w", pl.Kind, err)
	}
	if err := checkSeconds("hand", cfg.Hand); err != nil {
		return SimResult{}, fmt.Errorf("simulate %s plan: %w", pl.Kind, err)
	}
	if err := cfg.Shared.validate(); err != nil {
		return SimResult{}, fmt.Errorf("simulate %s plan: %w", pl.Kind, err)
	}
	if cfg.Shared.Cores > 0 && cfg.Batch > 0 {
		return SimResult{}, fmt.Errorf("simulate %s plan: batching with a shared CPU is not modeled", pl.Kind)
	}
	n := pl.N()
	sm := &simulator{
		pl:      pl,
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		h:       make(eventHeap, 0, 64),
		next:    make([]int32, n),
		pending: make([]int32, n),
		latest:  make([]float64, n),
	}
	if cfg.Shared.Cores > 0 {
		sm.lat = make([]float64, n)
		sm.par = launchCores(cfg)
	}
	res := SimResult{Runs: cfg.Runs, Times: make([]float64, 0, cfg.Runs)}
	for range cfg.Runs {
		if err := ctx.Err(); err != nil {
			return SimResult{}, fmt.Errorf("simulate %s plan: stopped after %d of %d runs: %w", pl.Kind, len(res.Times), cfg.Runs, err)
		}
		clear(sm.next)
		if cfg.Shared.Cores > 0 {
			res.Times = append(res.Times, sm.runShared())
			continue
		}
		res.Times = append(res.Times, sm.run())
	}
	sorted := slices.Clone(res.Times)
	slices.Sort(sorted)
	k := len(sorted)
	if k%2 == 1 {
		res.Median = sorted[k/2]
	} else {
		res.Median = (sorted[k/2-1] + sorted[k/2]) / 2
	}
	res.P95 = sorted[int(math.Ceil(0.95*float64(k)))-1]
	res.P99 = sorted[int(math.Ceil(0.99*float64(k)))-1]
	res.Min, res.Max = sorted[0], sorted[k-1]
	sum := 0.0
	for _, x := range sorted {
		sum += x
	}
	res.Mean = sum / float64(k)
	return res, nil
}
