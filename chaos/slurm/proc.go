package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

// netnsDir is where iproute2 keeps named network namespaces.
const netnsDir = "/run/netns"

// proc identifies a process across pid reuse: pid and start time.
type proc struct {
	PID   int
	Start uint64 // clock ticks after boot, field 22 of /proc/PID/stat
}

// netnsPrefix is the namespace name prefix of the emulated cluster's nodes,
// as chaos/cluster derives it.
func netnsPrefix(cfg cluster.Config) string {
	if cfg.NetnsPrefix != "" {
		return cfg.NetnsPrefix
	}
	return cfg.Name + "-"
}

// clusterNetns lists the named network namespaces of the emulated cluster's
// nodes: prefix+"node" followed by digits.
func clusterNetns(cfg cluster.Config) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list network namespaces: %w", err)
	}
	prefix := netnsPrefix(cfg) + "node"
	var out []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" {
			continue
		}
		out = append(out, e.Name())
	}
	return out, nil
}

// procsInNetns returns the live processes of the named network namespaces
// (found by namespace with cluster.PidsInNetns, never by name), each with
// its start time so that a reused pid is not mistaken for it.
func procsInNetns(names []string) (map[string][]proc, error) {
	pids, err := cluster.PidsInNetns(names)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]proc, len(pids))
	for n, ps := range pids {
		for _, pid := range ps {
			if p, zombie, ok := readProc(pid); ok && !zombie {
				out[n] = append(out[n], p)
			}
		}
	}
	return out, nil
}

// procsOfCluster lists every process in the emulated cluster's nodes.
func procsOfCluster(cfg cluster.Config) ([]proc, error) {
	names, err := clusterNetns(cfg)
	if err != nil {
		return nil, err
	}
	byNS, err := procsInNetns(names)
	if err != nil {
		return nil, err
	}
	var all []proc
	for _, ps := range byNS {
		all = append(all, ps...)
	}
	return all, nil
}

// readProc reads a process's identity; ok is false for a process that is
// gone. zombie reports a process that has exited but not been reaped.
func readProc(pid int) (p proc, zombie, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false, false
	}
	// Fields after the parenthesised command name: state is field 3,
	// starttime field 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return proc{}, false, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return proc{}, false, false
	}
	return proc{PID: pid, Start: start}, f[0] == "Z" || f[0] == "X", true
}

// alive reports whether p still runs (the same process, not a reused pid,
// and not a zombie).
func (p proc) alive() bool {
	q, zombie, ok := readProc(p.PID)
	return ok && !zombie && q.Start == p.Start
}

// waitGone waits until none of procs runs any more. An exited process
// counts as gone even while it is a zombie: the daemons' parent is init,
// which reaps them when it gets to it (on the test machines up to ~2 s
// later, when ps still lists them as <defunct>).
func waitGone(ctx context.Context, procs []proc) error {
	var running []int
	err := cluster.Poll(ctx, 15*time.Second, "wait for the cluster's processes to exit", func() (bool, error) {
		running = running[:0]
		for _, p := range procs {
			if p.alive() {
				running = append(running, p.PID)
			}
		}
		return len(running) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w: still running: %v", err, running)
	}
	return nil
}
