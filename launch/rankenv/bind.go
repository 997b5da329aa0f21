package rankenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Binding ranks to CPUs (--bind-to core|socket). An agent binds the ranks
// of its node among the CPUs it may use itself (its affinity mask, which a
// cgroup or an outer launcher may have narrowed), grouped into cores or
// sockets by the kernel's topology in /sys. Local rank i gets group
// i mod groups: with core, more ranks than cores is an error unless the job
// allows sharing (--oversubscribe); with socket, ranks share their socket.

// cpuGroups returns the CPUs of this node's agent grouped by kind ("core"
// or "socket"), in the order of each group's first CPU.
func cpuGroups(kind string) ([][]int, error) {
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		return nil, fmt.Errorf("read the agent's CPU affinity: %w", err)
	}
	var groups [][]int
	index := map[string]int{}
	for cpu := 0; cpu < len(mask)*64; cpu++ {
		if !mask.IsSet(cpu) {
			continue
		}
		pkg := topologyID(cpu, "physical_package_id")
		key := pkg
		if kind == "core" {
			key += "/" + topologyID(cpu, "core_id")
		}
		if key == "?" || key == "?/?" { // no topology: each CPU a core of one socket
			key = "cpu" + strconv.Itoa(cpu)
			if kind == "socket" {
				key = "socket"
			}
		}
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], cpu)
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("the agent's CPU affinity mask is empty")
	}
	return groups, nil
}

// topologyID reads one topology attribute of cpu, or "?".
func topologyID(cpu int, attr string) string {
	b, err := os.ReadFile(filepath.Join("/sys/devices/system/cpu", "cpu"+strconv.Itoa(cpu), "topology", attr))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// RankBindings returns the CPU set of each of a node's localSize ranks for
// --bind-to kind, or nil for none.
func RankBindings(kind string, localSize int, share bool) ([]unix.CPUSet, error) {
	if kind == "" || kind == "none" || localSize == 0 {
		return nil, nil
	}
	if kind != "core" && kind != "socket" {
		return nil, fmt.Errorf("--bind-to %q: want none, core or socket", kind)
	}
	groups, err := cpuGroups(kind)
	if err != nil {
		return nil, fmt.Errorf("--bind-to %s: %w", kind, err)
	}
	if kind == "core" && localSize > len(groups) && !share {
		return nil, fmt.Errorf("--bind-to core: %d ranks on this node, which has %d cores for them; --oversubscribe lets ranks share cores",
			localSize, len(groups))
	}
	sets := make([]unix.CPUSet, localSize)
	for i := range sets {
		for _, cpu := range groups[i%len(groups)] {
			sets[i].Set(cpu)
		}
	}
	return sets, nil
}

// BindingOf returns local rank i's CPU set from sets, or nil when unbound.
func BindingOf(sets []unix.CPUSet, i int) *unix.CPUSet {
	if sets == nil {
		return nil
	}
	return &sets[i]
}

// cpuList renders a CPU set as the kernel's lists do ("0-3,8").
func CPUList(set *unix.CPUSet) string {
	var b strings.Builder
	n := len(set) * 64
	for cpu := 0; cpu < n; cpu++ {
		if !set.IsSet(cpu) {
			continue
		}
		end := cpu
		for end+1 < n && set.IsSet(end+1) {
			end++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpu))
		if end > cpu {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(end))
		}
		cpu = end
	}
	return b.String()
}

// StartBound starts start's process bound to set: the calling thread takes
// the set for the fork (a child inherits the mask of the thread that forks
// it, and os/exec forks on the calling thread), so the rank runs bound from
// its first instruction and every thread it makes inherits the set. The
// thread's own mask is restored afterwards; if that fails, the thread stays
// locked to this goroutine and ends with it rather than run other
// goroutines on the rank's CPUs.
func StartBound(set *unix.CPUSet, start func() error) error {
	if set == nil {
		return start()
	}
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("read CPU affinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, set); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("bind to CPUs %s: %w", CPUList(set), err)
	}
	err := start()
	if unix.SchedSetaffinity(0, &old) == nil {
		runtime.UnlockOSThread()
	}
	return err
}
