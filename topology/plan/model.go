package plan

import (
	"errors"
	"fmt"
)

// Model holds the parameters of the launch-time model, in seconds.
//
// Without batching (Batch == 0) a child with order i is up at
//
//	launch(parent) + Seq*(i-1) + Rem.
//
// With batching, a leaf launcher (a node that has children, all of them
// leaves) with f > Batch children launches them in batches of Batch: child
// number q (0-based) of batch j is up at S_j + Seq*q + Rem, where S_0 is
// the launcher's own launch time and S_{j+1} = (the latest launch time in
// batch j) + BatchWait. Other nodes are not batched.
type Model struct {
	Seq, Rem  float64
	Batch     int     // leaf-launcher batch size b; 0 disables batching
	BatchWait float64 // seconds a leaf launcher waits after a batch is up
}

// Validate reports whether the model's parameters are usable.
func (m Model) Validate() error {
	if err := checkSeconds("seq", m.Seq); err != nil {
		return err
	}
	if err := checkSeconds("rem", m.Rem); err != nil {
		return err
	}
	if err := checkSeconds("batch wait", m.BatchWait); err != nil {
		return err
	}
	if m.Batch < 0 {
		return fmt.Errorf("batch = %d: must be >= 0 (0 disables batching)", m.Batch)
	}
	if m.Batch == 0 && m.BatchWait != 0 {
		return errors.New("batch wait set without a batch size")
	}
	return nil
}

// IsLeafLauncher reports whether v has children and all of them are
// leaves: the nodes that batching applies to.
func (pl *Plan) IsLeafLauncher(v int) bool {
	cs := pl.Children(v)
	if len(cs) == 0 {
		return false
	}
	for _, c := range cs {
		if pl.childOff[c+1] != pl.childOff[c] {
			return false
		}
	}
	return true
}

// batched reports whether v launches its children in several batches.
func (pl *Plan) batched(v int, batch int) bool {
	return batch > 0 && len(pl.Children(v)) > batch && pl.IsLeafLauncher(v)
}

// LaunchTimes returns each node's modeled launch time (seconds, indexed by
// node id) under m.
func (pl *Plan) LaunchTimes(m Model) ([]float64, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("model of %s plan: %w", pl.Kind, err)
	}
	t := make([]float64, len(pl.Parent))
	// Pre-order visits a parent before its children.
	for _, v := range pl.preOrder {
		cs := pl.Children(int(v))
		if !pl.batched(int(v), m.Batch) {
			for i, c := range cs {
				t[c] = t[v] + m.Seq*float64(i) + m.Rem
			}
			continue
		}
		s := t[v]
		for lo := 0; lo < len(cs); lo += m.Batch {
			hi := min(lo+m.Batch, len(cs))
			last := 0.0
			for q, c := range cs[lo:hi] {
				t[c] = s + m.Seq*float64(q) + m.Rem
				last = max(last, t[c])
			}
			s = last + m.BatchWait
		}
	}
	return t, nil
}

// ModelTime returns the modeled launch time of the whole plan, the
// largest node launch time, in seconds.
func (pl *Plan) ModelTime(m Model) (float64, error) {
	t, err := pl.LaunchTimes(m)
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for _, x := range t {
		worst = max(worst, x)
	}
	return worst, nil
}
