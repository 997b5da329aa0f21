package rankenv

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestCPUList(t *testing.T) {
	var s unix.CPUSet
	for _, c := range []int{0, 1, 2, 5, 7, 8, 64, 65} {
		s.Set(c)
	}
	if got := CPUList(&s); got != "0-2,5,7-8,64-65" {
		t.Errorf("cpuList = %q", got)
	}
	var empty unix.CPUSet
	if got := CPUList(&empty); got != "" {
		t.Errorf("empty set: %q", got)
	}
}

// rankBindings over this machine's own CPUs: core gives each rank one core
// (disjoint sets while ranks <= cores), too many ranks is an error unless
// sharing is allowed, and none binds nothing.
func TestRankBindings(t *testing.T) {
	cores, err := cpuGroups("core")
	if err != nil {
		t.Fatal(err)
	}
	sets, err := RankBindings("core", len(cores), false)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for i := range sets {
		if sets[i].Count() == 0 {
			t.Fatalf("rank %d bound to nothing", i)
		}
		for c := 0; c < len(sets[i])*64; c++ {
			if sets[i].IsSet(c) {
				if seen[c] {
					t.Fatalf("CPU %d given twice: %v", c, CPUList(&sets[i]))
				}
				seen[c] = true
			}
		}
	}
	if _, err := RankBindings("core", len(cores)+1, false); err == nil {
		t.Error("more ranks than cores without sharing: no error")
	}
	if sets, err := RankBindings("core", len(cores)+1, true); err != nil || CPUList(&sets[len(cores)]) != CPUList(&sets[0]) {
		t.Errorf("shared: %v", err)
	}
	if sets, err := RankBindings("socket", 3, false); err != nil || len(sets) != 3 {
		t.Errorf("socket: %v", err)
	}
	if sets, err := RankBindings("none", 3, false); err != nil || sets != nil || BindingOf(sets, 1) != nil {
		t.Errorf("none: %v %v", sets, err)
	}
}
