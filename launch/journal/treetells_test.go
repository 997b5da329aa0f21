package journal

import (
	"slices"
	"testing"
)

// TestTreeTellsInOrderOnceCommitted: a tree change is told only once a
// commit covers it, changes in the order they were made, each once; a
// tell may record a change of its own, told on a later commit.
func TestTreeTellsInOrderOnceCommitted(t *testing.T) {
	var tt TreeTells
	var told []uint64
	tell := func(seq *uint64) func() { return func() { told = append(told, *seq) } }
	var s1, s2, s3, s4 uint64
	s1 = tt.Add(tell(&s1))
	s2 = tt.Add(tell(&s2))
	s3 = tt.Add(func() {
		told = append(told, s3)
		s4 = tt.Add(tell(&s4)) // recorded while telling: the next commit's
	})
	if tt.Last() != 3 || s1 != 1 || s2 != 2 || s3 != 3 {
		t.Fatalf("numbers %d %d %d, last %d", s1, s2, s3, tt.Last())
	}
	tt.Committed(0)
	if len(told) != 0 {
		t.Fatalf("told %v before any commit", told)
	}
	tt.Committed(2)
	if !slices.Equal(told, []uint64{1, 2}) {
		t.Fatalf("after the commit of 2: told %v", told)
	}
	tt.Committed(2)
	tt.Committed(3)
	if !slices.Equal(told, []uint64{1, 2, 3}) || tt.Last() != 4 {
		t.Fatalf("after the commit of 3: told %v, last %d", told, tt.Last())
	}
	tt.Committed(4)
	if !slices.Equal(told, []uint64{1, 2, 3, 4}) {
		t.Fatalf("after the commit of 4: told %v", told)
	}
}
