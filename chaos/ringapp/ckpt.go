package ringapp

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The ring application's arithmetic and its checkpoints: the recurrence it
// computes, the per-rank checkpoint files, and the rollback agreement after
// a recovery (ringapp.go runs them).

// The recurrence. v(r, 0) = ringStart(seed, r);
// v(r, s) = ringMix(r, s, v(r, s-1), v(r-1 mod N, s-1)).

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func ringStart(seed uint64, r int) uint64 {
	return splitmix64(seed ^ splitmix64(uint64(r)+0x5bd1e995))
}

func ringMix(r, s int, own, left uint64) uint64 {
	x := splitmix64(own ^ uint64(s)<<32 ^ uint64(r))
	return splitmix64(x + bits.RotateLeft64(left, 23) + 0x2545f4914f6cdd1d)
}

// ringChecksum folds the final values, in rank order.
func ringChecksum(vs []uint64) uint64 {
	c := uint64(len(vs))
	for _, v := range vs {
		c = splitmix64(c ^ v)
	}
	return c
}

// ringSimulate returns every rank's value at step steps, computed in one
// process.
func ringSimulate(size, steps int, seed uint64) []uint64 {
	cur, next := make([]uint64, size), make([]uint64, size)
	for r := range cur {
		cur[r] = ringStart(seed, r)
	}
	for s := 1; s <= steps; s++ {
		for r := range next {
			next[r] = ringMix(r, s, cur[r], cur[(r-1+size)%size])
		}
		cur, next = next, cur
	}
	return cur
}

// ringExpected is the checksum a run of size ranks must print.
func ringExpected(size, steps int, seed uint64) uint64 {
	return ringChecksum(ringSimulate(size, steps, seed))
}

// Checkpoints: one small file per rank and step, DIR/rRANK-sSTEP.ckpt,
// written to a temporary file and renamed (a rank killed while writing
// leaves a temporary file, never a torn checkpoint; no fsync: it guards
// against a process that dies, not a machine). The newest keep of a rank
// are kept: the steps at which the ranks are can differ by up to size-1,
// so keep covers the last common one.

type ckptStore struct {
	dir              string
	rank, size, keep int
	every            int
	seed             uint64
}

func newCkptStore(dir string, rank, size, every int, seed uint64) *ckptStore {
	return &ckptStore{dir: dir, rank: rank, size: size, every: every, seed: seed, keep: max(32, size/every+2)}
}

func (st *ckptStore) name(step int) string {
	return filepath.Join(st.dir, fmt.Sprintf("r%06d-s%010d.ckpt", st.rank, step))
}

func (st *ckptStore) content(step int, v uint64) string {
	return fmt.Sprintf("ringapp size %d seed %d rank %d step %d value %016x\n", st.size, st.seed, st.rank, step, v)
}

// tempPrefix starts the names of this rank's temporary files.
func (st *ckptStore) tempPrefix() string { return fmt.Sprintf(".r%06d-", st.rank) }

// write stores v as the value at step, then drops the checkpoint keep
// checkpoints older.
func (st *ckptStore) write(step int, v uint64) error {
	f, err := os.CreateTemp(st.dir, st.tempPrefix()+"*.tmp")
	if err != nil {
		return fmt.Errorf("checkpoint step %d: %w", step, err)
	}
	_, err = f.WriteString(st.content(step, v))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), st.name(step))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("checkpoint step %d: %w", step, err)
	}
	if old := step - st.keep*st.every; old > 0 {
		if err := os.Remove(st.name(old)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("drop checkpoint step %d: %w", old, err)
		}
	}
	return nil
}

// load reads the value at step; step 0 needs no file.
func (st *ckptStore) load(step int) (uint64, error) {
	if step == 0 {
		return ringStart(st.seed, st.rank), nil
	}
	b, err := os.ReadFile(st.name(step))
	if err != nil {
		return 0, fmt.Errorf("load checkpoint: %w", err)
	}
	v, err := st.parse(step, string(b))
	if err != nil {
		return 0, fmt.Errorf("load checkpoint %s: %w", st.name(step), err)
	}
	return v, nil
}

func (st *ckptStore) parse(step int, s string) (uint64, error) {
	var size, rank, got int
	var seed, v uint64
	n, err := fmt.Sscanf(s, "ringapp size %d seed %d rank %d step %d value %x\n", &size, &seed, &rank, &got, &v)
	if err != nil || n != 5 {
		return 0, fmt.Errorf("malformed (%v)", err)
	}
	if size != st.size || seed != st.seed || rank != st.rank || got != step {
		return 0, fmt.Errorf("of another run (size %d seed %d rank %d step %d)", size, seed, rank, got)
	}
	return v, nil
}

// list returns the steps of this rank's valid checkpoints, ascending, the
// newest keep of them; foreign reports how many files of this rank's name
// another run left (another size or seed), which are not listed.
func (st *ckptStore) list() (steps []int, foreign int, err error) {
	ents, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list checkpoints: %w", err)
	}
	prefix := fmt.Sprintf("r%06d-s", st.rank)
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		num, ok = strings.CutSuffix(num, ".ckpt")
		step, err := strconv.Atoi(num)
		if !ok || err != nil || step <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(st.dir, e.Name()))
		if err != nil {
			continue // dropped meanwhile
		}
		if _, err := st.parse(step, string(b)); err != nil {
			foreign++
			continue
		}
		steps = append(steps, step)
	}
	slices.Sort(steps)
	if len(steps) > st.keep {
		steps = steps[len(steps)-st.keep:]
	}
	return steps, foreign, nil
}

// removeTemps removes the temporary files an earlier incarnation of this
// rank left when it was killed while writing.
func (st *ckptStore) removeTemps() {
	ents, _ := os.ReadDir(st.dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), st.tempPrefix()) && strings.HasSuffix(e.Name(), ".tmp") {
			os.Remove(filepath.Join(st.dir, e.Name()))
		}
	}
}

// removeAll removes this rank's checkpoints, and the directory when it is
// the last to do so.
func (st *ckptStore) removeAll() {
	ents, _ := os.ReadDir(st.dir)
	prefix := fmt.Sprintf("r%06d-", st.rank)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) || strings.HasPrefix(e.Name(), "."+prefix) {
			os.Remove(filepath.Join(st.dir, e.Name()))
		}
	}
	os.Remove(st.dir) // fails while another rank's files are there
}

// The rollback agreement: after a recovery every rank contributes its
// incarnation, the last ring round it took part in and the steps of its
// checkpoints; every rank then rolls back to the largest step at which
// every rank has one (0, the start, at worst) and joins the ring's next
// round.

type ringAgreement struct {
	inc, round uint64
	steps      []int
}

func (a ringAgreement) encode() []byte {
	b := fmt.Appendf(nil, "%d %d ", a.inc, a.round)
	for i, s := range a.steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(s), 10)
	}
	return b
}

func decodeRingAgreement(p []byte) (ringAgreement, error) {
	f := strings.Split(string(p), " ")
	if len(f) != 3 {
		return ringAgreement{}, fmt.Errorf("rollback agreement %q: want 3 fields", p)
	}
	var a ringAgreement
	var err error
	if a.inc, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return ringAgreement{}, fmt.Errorf("rollback agreement %q: incarnation: %w", p, err)
	}
	if a.round, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return ringAgreement{}, fmt.Errorf("rollback agreement %q: round: %w", p, err)
	}
	if f[2] != "" {
		for _, s := range strings.Split(f[2], ",") {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				return ringAgreement{}, fmt.Errorf("rollback agreement %q: step %q", p, s)
			}
			a.steps = append(a.steps, n)
		}
	}
	return a, nil
}

// rollbackStep is the largest step in every list, 0 when there is none.
func rollbackStep(lists [][]int) int {
	if len(lists) == 0 {
		return 0
	}
	best := 0
	for _, s := range lists[0] {
		if s <= best {
			continue
		}
		everywhere := true
		for _, l := range lists[1:] {
			if !slices.Contains(l, s) {
				everywhere = false
				break
			}
		}
		if everywhere {
			best = s
		}
	}
	return best
}

// agree decodes every rank's contribution: the step to roll back to, the
// ring's next round and every rank's incarnation.
func agree(vals [][]byte) (step int, round uint64, incs []uint64, err error) {
	lists := make([][]int, len(vals))
	incs = make([]uint64, len(vals))
	for r, v := range vals {
		a, err := decodeRingAgreement(v)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("rank %d: %w", r, err)
		}
		lists[r], incs[r] = a.steps, a.inc
		round = max(round, a.round)
	}
	return rollbackStep(lists), round + 1, incs, nil
}

// Expected is the checksum a job of size ranks and steps steps from seed
// ends with: what rank 0 prints as "expected".
func Expected(size, steps int, seed uint64) uint64 { return ringExpected(size, steps, seed) }

// CheckCheckpoints checks the checkpoints a finished job left in dir: each
// rank's last is at the last multiple of every up to steps, none is
// another job's, and the oldest kept holds the value the simulation gives.
func CheckCheckpoints(dir string, size, every, steps int, seed uint64) error {
	for rank := range size {
		st := newCkptStore(dir, rank, size, every, seed)
		have, foreign, err := st.list()
		if err != nil || foreign != 0 || len(have) == 0 || have[len(have)-1] != steps/every*every {
			return fmt.Errorf("rank %d: checkpoints %v (%d foreign), %v", rank, have, foreign, err)
		}
		want := ringSimulate(size, have[0], seed)[rank]
		if v, err := st.load(have[0]); err != nil || v != want {
			return fmt.Errorf("rank %d: checkpoint at step %d holds %016x, %v; want %016x", rank, have[0], v, err, want)
		}
	}
	return nil
}
