package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/chaos/trial"
)

// The emulated cluster of `ftlaunch chaos --cluster emulated`: hosts in
// network namespaces with a real sshd each (chaos/cluster), brought up
// once per run and taken down at its end. Every trial's job runs from the
// machine's own namespace over SSH to them, as on a real cluster; its
// processes on a host are the processes in the host's network namespace
// besides the host's own (its namespace holder and listening sshd).

// DefaultClusterName and DefaultClusterPrefix are the chaos run's cluster by default: a name and network of its own, so
// that it clashes with neither the tests' (random names, 10.200-249.x.0/24)
// nor the benchmarks' (ftc 10.77/16, ftbench 10.78/16).
const (
	DefaultClusterName   = "ftchaos"
	DefaultClusterPrefix = "10.79.0.0/24"
)

// Timing of the emulated faults.
const (
	chaosHostOp    = 30 * time.Second       // bound of one cluster operation (kill, heal, revive, down)
	chaosSlowDelay = 150 * time.Millisecond // a slow link's delay on every packet into the host
	// chaosSessionWait is how long sshd's connections get to close once
	// the job's processes are gone.
	chaosSessionWait = time.Second
	// chaosHoldWait bounds how long a launch-phase fault waits for the
	// raft group while a host is held, well within the 10 s connect
	// timeout the held host's clients have.
	chaosHoldWait = 3 * time.Second
)

// chaosHosts is a run's emulated cluster.
type chaosHosts struct {
	c        *cluster.Cluster
	hostfile string   // one line per host: "node001 slots=PPN"
	names    []string // the hosts in hostfile order (agent i runs on names[i]; the spares last)
}

// upChaosHosts brings up o.Nodes hosts and o.SpareNodes spares after them
// (a stale cluster of the same name is removed first) and writes their hostfile into the cluster's state
// directory (removed with it).
func upChaosHosts(ctx context.Context, o *Options) (*chaosHosts, error) {
	prefix, err := netip.ParsePrefix(o.ClusterPrefix) // checked by parseChaosFlags
	if err != nil {
		return nil, fmt.Errorf("--cluster-prefix: %w", err)
	}
	// 10 s: a launch-phase trial holds one host's sshd stopped until its
	// faults are in (holdHost), which a handshake must outwait; faults
	// wait for nothing longer than chaosHoldWait meanwhile.
	cfg := cluster.Config{Name: o.ClusterName, Prefix: prefix, ConnectTimeout: 10 * time.Second}
	c, err := cluster.Up(ctx, cfg, o.Nodes+o.SpareNodes)
	if err != nil {
		return nil, fmt.Errorf("bring up the emulated cluster %q: %w", o.ClusterName, err)
	}
	h := &chaosHosts{c: c, hostfile: filepath.Join(c.Dir(), "chaos-hosts")}
	nodes, err := c.Nodes()
	if err != nil {
		return h, fmt.Errorf("emulated cluster %q: %w", o.ClusterName, err)
	}
	var b strings.Builder
	for _, n := range nodes {
		h.names = append(h.names, n.Name)
		fmt.Fprintf(&b, "%s slots=%d\n", n.Name, o.PPN)
	}
	if err := os.WriteFile(h.hostfile, []byte(b.String()), 0o644); err != nil {
		return h, fmt.Errorf("write the hostfile: %w", err)
	}
	return h, nil
}

// down takes the cluster down, with a context of its own: the run's may
// be the reason it ends.
func (h *chaosHosts) down() error {
	ctx, cancel := context.WithTimeout(context.Background(), chaosHostOp)
	defer cancel()
	if err := h.c.Down(ctx); err != nil {
		return fmt.Errorf("take the emulated cluster %q down: %w", h.c.Config().Name, err)
	}
	return nil
}

// procs lists the job's live processes on every host: all of a host's
// processes but its own (its namespace holder and listening sshd) and
// sshd's per-connection ones, returned apart as sessions. An sshd session
// is not the job's: the agent it runs is, and a session outlives its agent
// only when its client cannot be told (the client's host crashed, or is
// cut off): sshd keeps it until TCP gives up, as on a real cluster.
func (h *chaosHosts) procs() (job, sessions []jobProc) {
	nodes, err := h.c.Nodes()
	if err != nil {
		return nil, nil
	}
	netns := make([]string, len(nodes))
	for i, n := range nodes {
		netns[i] = n.Netns
	}
	byNS, err := cluster.PidsInNetns(netns)
	if err != nil {
		return nil, nil
	}
	for _, n := range nodes {
		for _, pid := range byNS[n.Netns] {
			if pid == n.HolderPID || pid == n.SSHDPID {
				continue
			}
			p, ok := procAt(pid)
			if !ok {
				continue
			}
			p.host = n.Name
			if strings.HasPrefix(p.cmdline, "sshd:") {
				sessions = append(sessions, p)
				continue
			}
			job = append(job, p)
		}
	}
	return job, sessions
}

// procAt reads a live (not zombie) process from /proc.
func procAt(pid int) (jobProc, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	p, ok := readStat(dir)
	if !ok || p.state == 'Z' || p.state == 'X' {
		return jobProc{}, false
	}
	p.pid, p.rank = pid, -1
	cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	p.cmdline = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
	return p, true
}

// sshdPID is host's listening sshd.
func (h *chaosHosts) sshdPID(host string) (int, error) {
	n, err := h.c.Node(host)
	if err != nil {
		return 0, err
	}
	if n.SSHDPID == 0 {
		return 0, fmt.Errorf("%s: %w", host, cluster.ErrNodeDown)
	}
	return n.SSHDPID, nil
}

// holdHost holds a launch on the emulated cluster at one host, from
// outside: its listening sshd is stopped, so that a connection to it is
// accepted by the kernel but never answered until continued (within the
// client's connect timeout). It is the emulated cluster's counterpart of
// launch's test-only start delay, which only local agents honour.
func (h *chaosHosts) holdHost(host string, sig syscall.Signal) error {
	pid, err := h.sshdPID(host)
	if err != nil {
		return fmt.Errorf("hold %s: %w", host, err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("hold %s: signal %v to its sshd %d: %w", host, sig, pid, err)
	}
	return nil
}

// hostFaults is what a trial did to the hosts, to undo once it is over.
type hostFaults struct {
	killed, parted []string
	slow           map[string]*cluster.SlowLink
	// cut: a host was crashed or cut off in this trial (healed or not):
	// every host's neighbour cache is flushed after it (revive).
	cut bool
}

// apply crashes, cuts off or slows a host.
func (h *chaosHosts) apply(ctx context.Context, hf *hostFaults, fault trial.Fault, host string) error {
	ctx, cancel := context.WithTimeout(ctx, chaosHostOp)
	defer cancel()
	switch fault {
	case trial.Node:
		if err := h.c.Kill(ctx, host); err != nil {
			return err
		}
		hf.killed = append(hf.killed, host)
		hf.cut = true
	case trial.Partition:
		if err := h.c.Partition(ctx, host); err != nil {
			return err
		}
		hf.parted = append(hf.parted, host)
		hf.cut = true
	case trial.Slow:
		// The slow link lives until unslow, not with ctx.
		s, err := h.c.SlowLink(context.WithoutCancel(ctx), host, chaosSlowDelay, 0)
		if err != nil {
			return err
		}
		if hf.slow == nil {
			hf.slow = map[string]*cluster.SlowLink{}
		}
		hf.slow[host] = s
	default:
		return fmt.Errorf("fault %q is not a host's", fault)
	}
	return nil
}

// unslow ends host's slow link, if any.
func (hf *hostFaults) unslow(host string) error {
	s := hf.slow[host]
	if s == nil {
		return nil
	}
	delete(hf.slow, host)
	if err := s.Stop(); err != nil {
		return fmt.Errorf("end the slow link of %s: %w", host, err)
	}
	return nil
}

// healHost reconnects one partitioned host (3x its detection time after
// the cut, as a stop is continued).
func (h *chaosHosts) healHost(hf *hostFaults, host string) error {
	if !slices.Contains(hf.parted, host) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), chaosHostOp)
	defer cancel()
	if err := h.c.Heal(ctx, host); err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	hf.parted = slices.DeleteFunc(hf.parted, func(p string) bool { return p == host })
	return nil
}

// heal ends every slow link and reconnects every partitioned host.
func (h *chaosHosts) heal(hf *hostFaults) error {
	var errs []error
	for _, host := range slices.Sorted(maps.Keys(hf.slow)) {
		errs = append(errs, hf.unslow(host))
	}
	ctx, cancel := context.WithTimeout(context.Background(), chaosHostOp)
	defer cancel()
	for _, host := range hf.parted {
		if err := h.c.Heal(ctx, host); err != nil {
			errs = append(errs, fmt.Errorf("heal: %w", err))
		}
	}
	hf.parted = nil
	return errors.Join(errs...)
}

// revive boots every crashed host again, for the next trial, and then
// flushes every host's neighbour (ARP) cache if a host was crashed or cut
// off: a peer's kernel that probed a host while it was dead or cut off
// (the retransmissions of a killed process's socket do) holds a failed or
// half-done entry for it, and a connection that a next job opens within
// that resolution's 3 s gets "no route to host" at once (seed
// 1892408179258181753 of --concurrent 2 --nodes 6 --seed 301, before this
// flush). A real host takes minutes to reboot; these take milliseconds.
func (h *chaosHosts) revive(hf *hostFaults, hadFault bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), chaosHostOp)
	defer cancel()
	var errs []error
	for _, host := range hf.killed {
		if err := h.c.Revive(ctx, host); err != nil {
			errs = append(errs, fmt.Errorf("revive: %w", err))
		}
	}
	hf.killed = nil
	if !hadFault {
		return errors.Join(errs...)
	}
	nodes, err := h.c.Nodes()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	flush := [][]string{{"neigh", "flush", "dev", h.c.Config().Bridge}}
	for _, n := range nodes {
		flush = append(flush, []string{"-n", n.Netns, "neigh", "flush", "all"})
	}
	for _, args := range flush {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out)))
		}
	}
	return errors.Join(errs...)
}
